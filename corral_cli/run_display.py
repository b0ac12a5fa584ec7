"""What `corral run` shows in a terminal (issue 16): a status line at the bottom (a
spinner, the phase, its elapsed time), the script's output printed above it line by line
as it comes, and nothing of it left once the run ends (the summary follows on stderr).

Only for a terminal: when stdout is a pipe or a file (CI logs), `corral run` writes the
output bytes exactly as the script wrote them and draws nothing.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from sandboxes.events import LogLevel, at_least

REFRESH_PER_SECOND = 8


class _Status:
    """The status line, computed at each refresh so its clock moves between events."""

    def __init__(self, display: TerminalRun) -> None:
        self._display = display
        self._spinner = Spinner("dots", style="cyan")

    def __rich__(self) -> RenderableType:
        d = self._display
        elapsed = time.monotonic() - d.phase_started
        if d.phase == "running":
            line = f"running · {elapsed:.1f} s of {d.timeout_seconds} s"
        else:
            line = f"{d.message} · {elapsed:.1f} s"
        self._spinner.update(text=Text(line, style="dim"))
        return self._spinner


class TerminalRun:
    """CallEvents plus an output sink for one `corral run` in a terminal. Use as a context
    manager around the run."""

    def __init__(self, console: Console, timeout_seconds: int) -> None:
        self.console = console
        self.timeout_seconds = timeout_seconds
        self.phase = "starting"
        self.message = "starting"
        self.phase_started = time.monotonic()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._live = Live(
            _Status(self),
            console=console,
            transient=True,
            refresh_per_second=REFRESH_PER_SECOND,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def __enter__(self) -> TerminalRun:
        self._live.start(refresh=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        rest = self._partial + self._decoder.decode(b"", final=True)
        self._partial = ""
        if rest:
            self._print(rest)
        self._live.stop()

    # ------------------------------------------------------------------ events
    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        # `output` is the live view's excerpt; the terminal gets every byte from on_output.
        if phase == "running" and remaining is not None:
            # the run's own clock: its timeout minus what remains
            self.phase_started = time.monotonic() - (self.timeout_seconds - remaining)
        elif phase != self.phase:
            self.phase_started = time.monotonic()
        self.phase = phase
        self.message = message
        self._live.refresh()

    async def log(
        self, level: LogLevel, event: str, details: Mapping[str, Any] | None = None
    ) -> None:
        if at_least(level, "warning"):
            what = ", ".join(f"{k}={v}" for k, v in (details or {}).items())
            self.console.print(
                Text(f"[corral {level}] {event}" + (f": {what}" if what else ""), style="yellow")
            )

    # ------------------------------------------------------------------ output
    def on_output(self, chunk: bytes) -> None:
        text = self._partial + self._decoder.decode(chunk)
        *lines, self._partial = text.split("\n")
        for line in lines:
            self._print(line)

    def _print(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)


__all__ = ["TerminalRun"]
