"""`tool_calls.jsonl` (SPEC S5.6): one line per call, allowed or refused.

Records the agent, tool, decision and duration, plus the argument NAMES;
never argument values (a script, typed text or a URL may carry secrets).

A line that cannot be written (a full disk) is reported on stderr and the call's answer
goes out: this log says how calls went; the audit (orchestrator.audit) is what refuses a
call it cannot hold.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from orchestrator.audit import append_line

logger = logging.getLogger("corral.mcp")

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
        try:
            append_line(self.path, line.encode())
        except OSError as exc:
            logger.warning("tool call not logged to %s: %s", self.path, exc)
