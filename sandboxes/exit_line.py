"""The exit line (issue 23 item 8): how a script's run ends without waiting for its
container to stop.

The script's command (`sandboxes.script_policy.script_command`) runs the interpreter under
a small shell that, once the script has exited, prints one line on the same stdout:
`MARK CODE:OOM_KILLS`, `MARK` being a fresh random token of this run, `CODE` the script's
exit status and `OOM_KILLS` the container's count of processes killed by its memory limit
(read from its cgroup; empty where the runtime does not show it, as under gVisor).
It comes after every byte the script wrote (one pipe keeps the order), so once it is read
the output is whole, and the engine's teardown of the container (tens of milliseconds)
and its wait and inspect are no longer on the caller's time.

`ExitLine` takes the line out of the output. It is trusted only for the plain case: an
exit status below 128 and no OOM kill. Anything else (a signal, the memory limit, a
runtime that shows no count, a line that does not parse) is read to the end as before and
the engine says how the container ended. The line is the script's own word, like its exit
status and its output: a script that forges it ends its own run early, with a status it
could have exited with; a kill by the time cap or the memory limit is never taken from it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

MARK_PREFIX = "corral-exit-"
_STATUS = re.compile(rb"(\d{1,3}):(\d{0,9})")
MAX_STATUS_BYTES = 16  # "255:123456789" and room; a longer tail is not an exit line


def new_mark() -> str:
    """A fresh token for one run: `corral-exit-` and 16 hex digits."""
    return MARK_PREFIX + secrets.token_hex(8)


def is_mark(text: str) -> bool:
    return re.fullmatch(re.escape(MARK_PREFIX) + "[0-9a-f]{16}", text) is not None


@dataclass(frozen=True, slots=True)
class ExitSaid:
    code: int
    oom_kills: int | None  # None: the runtime showed no count

    @property
    def plain(self) -> bool:
        """Whether the line alone may end the run: exited by itself, nothing OOM-killed."""
        return 0 <= self.code < 128 and self.oom_kills == 0


class ExitLine:
    """Feed the run's output through `feed`; what it returns is the script's output. Once
    the whole line came, `said` holds it (or `malformed` is set); after a plain one the
    caller stops reading (and nothing more is output), after any other what follows is
    output again. `rest` returns what was held back when the output ends."""

    def __init__(self, mark: str) -> None:
        self._mark = mark.encode()
        self._held = b""
        self._seen = False
        self.said: ExitSaid | None = None
        self.malformed = False

    @property
    def plain(self) -> bool:
        return self.said is not None and self.said.plain

    def feed(self, chunk: bytes) -> bytes:
        if self._seen:
            return chunk
        data = self._held + chunk
        at = data.find(self._mark)
        if at < 0:
            keep = _prefix_at_end(data, self._mark)
            self._held = data[len(data) - keep :]
            return data[: len(data) - keep]
        status = data[at + len(self._mark) :]
        end = status.find(b"\n")
        if end < 0 and len(status) <= MAX_STATUS_BYTES:
            self._held = data[at:]  # the line's end is still to come
            return data[:at]
        self._seen = True
        self._held = b""
        found = _STATUS.fullmatch(status[:end]) if 0 <= end <= MAX_STATUS_BYTES else None
        if found is None:
            self.malformed = True
            return data
        code, kills = found.group(1), found.group(2)
        self.said = ExitSaid(int(code), int(kills) if kills else None)
        # After a plain line the reading stops: what came with it in this chunk (a process
        # the script left, writing on) is dropped too, whichever way the chunks fell.
        return data[:at] if self.said.plain else data[:at] + status[end + 1 :]

    def rest(self) -> bytes:
        """What was held back as a possible start of the line, once the output ended
        without it: it was output."""
        held, self._held = self._held, b""
        return held


def _prefix_at_end(data: bytes, mark: bytes) -> int:
    """The length of the longest end of `data` that is a start of `mark`."""
    for size in range(min(len(mark) - 1, len(data)), 0, -1):
        if data.endswith(mark[:size]):
            return size
    return 0
