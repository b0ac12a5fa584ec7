"""Append-only audit log: one JSON object per line in CORRAL_HOME/audit.jsonl.

Events carry the time, the agent, the event name and small details. Callers
pass only metadata (codes, lengths, durations): never a script's output, typed
text or a secret. `AuditLog.record` refuses detail keys that name such data so
a mistake shows up in tests rather than in the log.

A line is complete or absent for a reader (docs/reliability.md, "The audit"): each event
is one O_APPEND write, a writer killed or stopped by a full disk mid-line leaves a torn
tail that the next writer closes with a line end first, and `read` skips a line that is
not whole JSON. A log that cannot be written raises `AuditUnavailable`, naming the file
and the fix: callers record before they act or answer, so nothing is done or decided that
the log does not hold.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandboxes.errors import AuditUnavailable

FORBIDDEN_DETAIL_KEYS = frozenset({"output", "code", "text", "password", "secret", "token"})
Follower = Callable[[str, str | None, Mapping[str, Any]], None]
logger = logging.getLogger("corral.audit")


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        # Told of each event once it is written (the gateway's ledger of work in flight,
        # orchestrator.ledger); a follower that fails is logged, never the record's failure.
        self.followers: list[Follower] = []

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
        try:
            append_line(self.path, (line + "\n").encode())
        except OSError as exc:
            raise AuditUnavailable(self.path, exc.strerror or str(exc)) from exc
        for follow in self.followers:
            try:
                follow(event, agent, details)
            except Exception:
                logger.exception("an audit follower failed on %s", event)

    def read(self) -> list[dict[str, Any]]:
        """Every whole event, oldest first; a torn line is skipped."""
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            return [event for line in fh if (event := _event(line)) is not None]


def append_line(path: Path, data: bytes) -> None:
    """Append one line to a JSON-lines log in one O_APPEND write (concurrent writers never
    interleave); a torn tail a killed writer left is closed with a line end first. The
    look at the tail and the write hold the file's lock (every process writing the log
    takes it), or a writer could see another's line half written and add a blank line."""
    fd = _open_for_append(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor closes
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:  # a short write (the disk filled under it) goes on, or raises
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _open_for_append(path: Path) -> int:
    """The log's descriptor; its folder made only when missing (a log is written at every
    call: a mkdir per line cost a syscall and a path walk each time, issue 23 item 9)."""
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
    try:
        return os.open(path, flags, 0o600)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return os.open(path, flags, 0o600)


def _event(line: str) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None
