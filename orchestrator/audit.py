"""Append-only audit log: one JSON object per line in CORRAL_HOME/audit.jsonl.

Events carry the time, the agent, the event name and small details. Callers
pass only metadata (codes, lengths, durations): never a script's output, typed
text or a secret. `AuditLog.record` refuses detail keys that name such data so
a mistake shows up in tests rather than in the log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FORBIDDEN_DETAIL_KEYS = frozenset({"output", "code", "text", "password", "secret", "token"})


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, event: str, agent: str | None, details: Mapping[str, Any]) -> None:
        """Append one event. A single O_APPEND write, so concurrent writers never interleave."""
        bad = FORBIDDEN_DETAIL_KEYS.intersection(details)
        if bad:
            raise ValueError(f"audit details must not carry {sorted(bad)}")
        line = json.dumps(
            {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "agent": agent,
                "event": event,
                "details": dict(details),
            },
            separators=(",", ":"),
            sort_keys=True,
        )
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
