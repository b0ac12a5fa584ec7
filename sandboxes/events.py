"""What a long call tells its caller while it runs: progress and log events (issue 16).

A call handler (the script sandbox, a kiosk session start, later an approval that waits
for an operator) is handed a `CallEvents` and reports through it:

    await events.progress("container", "starting the script sandbox")
    await events.progress("running", "running: 2 s of 30 s", remaining=28, output=lines)
    await events.log("info", "sandbox_started", {"kind": "script"})

Who listens depends on where the call came from: the MCP front turns events into
`notifications/progress` (only when the request carried a progressToken) and
`notifications/message` (at or above the level the client set); the gateway streams
them to the front as NDJSON; `corral run` draws them with rich in a terminal. A call
with no listener gets `NO_EVENTS`, which drops everything.

Rules for emitters: `phase` is a short word (`container`, `display`, `egress`,
`running`, `approval` ...); `message` is one line a person reads; `remaining` is the
seconds left before this phase's deadline, when it has one; `output` is only ever the
script's own output (`OutputTail`). Never put typed text, keys, secrets or URLs with
credentials in any field: these events reach logs and client UIs.

Emitting never fails the call: an implementation swallows its own delivery errors.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any, Literal, Protocol, get_args

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[LogLevel, ...] = get_args(LogLevel)  # least severe first (RFC 5424 order)

# How much of the script's newest output one progress event carries (issue 16; docs/tools.md).
PROGRESS_OUTPUT_BYTES = 2048
# How often a running script reports its elapsed time and new output lines.
PROGRESS_INTERVAL_SECONDS = 0.5


def at_least(level: LogLevel, threshold: LogLevel) -> bool:
    """Whether `level` is as severe as `threshold` or more."""
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)


class CallEvents(Protocol):
    """The emitter a call handler reports through. Both methods return once the event is
    handed on; neither raises."""

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None: ...

    async def log(
        self, level: LogLevel, event: str, details: Mapping[str, Any] | None = None
    ) -> None: ...


class NoEvents:
    """The listener of a call nobody watches."""

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        return None

    async def log(
        self, level: LogLevel, event: str, details: Mapping[str, Any] | None = None
    ) -> None:
        return None


NO_EVENTS: CallEvents = NoEvents()


class OutputTail:
    """The script's output as progress shows it: complete lines written since the last
    `take`, the newest of them within `budget` bytes (UTF-8). Lines that did not fit are
    counted in a first line `[... N bytes not shown]`; a line longer than the whole budget
    keeps its end. The reply still carries the whole output (S1.4); this is only the live
    view."""

    def __init__(self, budget: int = PROGRESS_OUTPUT_BYTES) -> None:
        if budget < 64:
            raise ValueError("budget must be at least 64 bytes")
        self.budget = budget
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lines: list[str] = []
        self._partial = ""

    def feed(self, chunk: bytes) -> None:
        text = self._partial + self._decoder.decode(chunk)
        *complete, self._partial = text.split("\n")
        self._lines += complete
        if len(self._partial.encode()) > self.budget:  # no line end in sight: show it anyway
            self._lines.append(self._partial)
            self._partial = ""

    def take(self, *, final: bool = False) -> str:
        """The lines since the last call (and, when `final`, the unfinished last line)."""
        if final:
            rest = self._partial + self._decoder.decode(b"", final=True)
            self._partial = ""
            if rest:
                self._lines.append(rest)
        lines, self._lines = self._lines, []
        if not lines:
            return ""
        kept: list[str] = []
        used = 0
        skipped = 0
        room = self.budget - 40  # the "not shown" line, when there is one
        for index in range(len(lines) - 1, -1, -1):
            size = len(lines[index].encode()) + 1
            if used + size > room:
                older = lines[:index]
                if kept:
                    older = lines[: index + 1]
                else:  # the newest line alone is larger than the budget: keep its end
                    tail = lines[index].encode()[-room:].decode(errors="ignore")
                    kept.append(tail)
                    skipped += size - 1 - len(tail.encode())
                skipped += sum(len(line.encode()) + 1 for line in older)
                break
            kept.append(lines[index])
            used += size
        kept.reverse()
        if skipped:
            kept.insert(0, f"[... {skipped} bytes not shown]")
        return "\n".join(kept)


__all__ = [
    "LOG_LEVELS",
    "NO_EVENTS",
    "PROGRESS_INTERVAL_SECONDS",
    "PROGRESS_OUTPUT_BYTES",
    "CallEvents",
    "LogLevel",
    "NoEvents",
    "OutputTail",
    "at_least",
]
