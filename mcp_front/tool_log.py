"""`tool_calls.jsonl` (SPEC S5.6): one line per call, allowed or refused.

Records the agent, tool, decision and duration, plus the argument NAMES;
never argument values (a script, typed text or a URL may carry secrets).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

Outcome = Literal["allowed", "refused", "error"]


class ToolCallLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def record(
        self,
        *,
        agent: str,
        tool: str,
        decision: Outcome,
        duration_ms: int,
        arg_names: Iterable[str] = (),
        code: int | None = None,
        reason: str = "",
    ) -> None:
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "agent": agent,
            "tool": tool,
            "decision": decision,
            "duration_ms": duration_ms,
            "arg_names": sorted(arg_names),
        }
        if code is not None:
            entry["code"] = code
        if reason:
            entry["reason"] = reason
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
