"""One session's or rig's recorder (issue 24): masked frames taken when the screen may
have changed, at most `fps` a second, none while nothing changes.

What wakes it (`poke`): an action of the AI's (through the one pipeline, with its mark),
a timeline entry (an approval raised or decided, a take over, a hand back) and each input
a person's console forwards while they hold the seat. Awake, it takes a frame through the
surface's own masked screenshot (`capture`: the same masking as the screenshot tool), and
keeps taking one every 1/fps seconds while they differ, until the screen is still (two
equal frames) or `FOLLOW_SECONDS` passed since the last poke: no loop runs on a timer
while nothing happens. A frame equal to the last one written is not written.

A frame the masking could not clear arrives black (`Frame.blacked` says why); the first
of a run of black frames puts its reason in the timeline. When the video cannot be
written (a full disk) or the recordings would pass their bound, the recording stops: the
session goes on, the timeline and the audit say why (`on_stopped`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from orchestrator.errors import CorralError
from orchestrator.recordings.store import LIVE_VIDEO, TIMELINE, RecordingMeta, RecordingStore
from orchestrator.recordings.use import AiUse
from orchestrator.recordings.video import VideoError, VideoFile
from sandboxes.masking import png_size
from sandboxes.recording import Mark

logger = logging.getLogger("corral.recording")

FOLLOW_SECONDS = 3.0  # how long a poke keeps frames coming while the screen changes
CAPTURE_DEADLINE = 8.0  # over the screenshot path's own deadlines (5 s): they end it first
LAST_FRAME_DEADLINE = 2.0  # a surface's end waits at most this for its last frame
GROWTH_CHECK_BYTES = 1 << 20  # ask `on_grown` about the bound after each MiB written
# A recording stops while its disk has less free than this: the audit and the session
# keep the room they need (nothing runs that cannot be audited), the recording does not.
MIN_FREE_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class Frame:
    """A masked screenshot: `png`, and why it is all black when the masking could not
    clear it (None: masked as usual)."""

    png: bytes
    blacked: str | None = None


Capture = Callable[[], Awaitable[Frame]]


class Recorder:
    def __init__(
        self,
        store: RecordingStore,
        meta: RecordingMeta,
        capture: Capture,
        fps: int,
        *,
        on_stopped: Callable[[str], None],
        on_grown: Callable[[], str | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        encoders: anyio.CapacityLimiter | None = None,
        use: AiUse | None = None,
    ) -> None:
        self.store = store
        self.meta = meta
        self.capture = capture
        self.fps = fps
        self.on_stopped = on_stopped
        self.on_grown = on_grown
        self.clock = clock
        self.encoders = encoders  # the threads every recorder shares (None: anyio's own)
        self.where: Path = store.dir_of(meta.id)
        self._t0 = clock()
        self._wake = anyio.Event()
        self._poked = clock()
        self.use = AiUse(clock) if use is None else use  # the surface's (`_quiet`)
        self._offered: Frame | None = None  # a frame taken already, used before capturing
        self.notes = 0  # timeline lines noted so far
        self._offered_at = 0  # `notes` when the offered frame was offered
        self._seen: tuple[int, Frame] | None = None  # the latest frame, `notes` when begun
        self._marks: list[Mark] = []
        self._last: bytes | None = None  # digest of the last frame written
        self._blacked: str | None = None
        self._video: VideoFile | None = None
        self._written_at_check = 0
        self.stopped: str | None = None
        self.closed = False
        fd = os.open(self.where / TIMELINE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._timeline = os.fdopen(fd, "a", encoding="utf-8")

    # ------------------------------------------------------------------ what happens
    def poke(self, mark: Mark | None = None, *, frame: Frame | None = None) -> None:
        """The screen may have changed (an input, a timeline entry): take frames now.
        `frame`: the masked screen as it is now, taken already (a screenshot's). When the
        AI acted is the surface's `AiUse` to say (its calls' end starts the quiet time)."""
        if self.stopped or self.closed:
            return
        if mark is not None:
            self._marks.append(mark)
        if frame is not None:
            self._offered, self._offered_at = frame, self.notes
        self._poked = self.clock()
        self._wake.set()

    def note(
        self, entry: dict[str, Any], frame: Frame | None = None, *, approval: bool = False
    ) -> None:
        """One timeline line (an action, an approval raised: `approval`, a take over, an
        event of the recording's own), with its time since the recording began; wakes the
        recorder."""
        if self.closed:
            return
        line = {"t": round(self.clock() - self._t0, 3), "at": time.time(), **entry}
        self.notes += 1
        self._count(line, approval)
        try:
            self._timeline.write(json.dumps(line, separators=(",", ":")) + "\n")
            self._timeline.flush()
        except OSError as exc:
            self._stop(f"the recording could not be written ({exc.strerror or exc})")
            return
        self.poke(frame=frame)

    def _count(self, line: dict[str, Any], approval: bool) -> None:
        tool = line.get("tool")
        if tool == "takeover":
            self.meta = self.meta.model_copy(update={"takeovers": self.meta.takeovers + 1})
        elif approval:
            self.meta = self.meta.model_copy(update={"approvals": self.meta.approvals + 1})
        elif tool is not None and tool != "handback" and line.get("actor", "ai") == "ai":
            self.meta = self.meta.model_copy(update={"actions": self.meta.actions + 1})

    # ------------------------------------------------------------------ the task
    async def run(self) -> None:
        """Take frames whenever poked, until closed or stopped (cancel to end it)."""
        while not (self.stopped or self.closed):
            await self._wake.wait()
            self._wake = anyio.Event()
            await self._follow()

    async def _follow(self) -> None:
        """Frames every 1/fps while the screen changes, for FOLLOW_SECONDS after the last
        poke; done as soon as a frame equals the one before and nothing poked since."""
        while not (self.stopped or self.closed):
            await self._quiet()
            began = self.clock()
            changed = await self._frame()
            if not changed and not self._wake.is_set():
                return
            if self.clock() - self._poked > FOLLOW_SECONDS:
                return
            self._wake = anyio.Event()
            await anyio.sleep(max(0.0, began + 1 / self.fps - self.clock()))  # the pace

    async def _quiet(self) -> None:
        """Before taking a frame itself: wait until no call of the AI's uses the surface
        and it has not acted for QUIET_SECONDS (`AiUse`). While the AI acts back to back,
        the frames are the screenshots it takes (offered) and the one taken once it
        pauses, with the marks of every action since. The first frame does not wait: a
        recording begins with the surface as it started, however soon and however long the
        AI acts on it."""
        while self._offered is None and self._last is not None:
            if self.use.busy:
                await self.use.idle()  # its end sets `acted`: the quiet counts from it
                continue
            wait = self.use.quiet_in()
            if wait <= 0:
                return
            await anyio.sleep(wait)  # pacing behind the AI's inputs, not a poll

    async def _frame(self) -> bool:
        """Take (or take the offered) and write one frame; whether it differs from the
        last one written."""
        marks = tuple(self._marks)
        self._marks.clear()
        notes = self._offered_at if self._offered is not None else self.notes
        frame, self._offered = self._offered, None
        if frame is None:
            with anyio.move_on_after(CAPTURE_DEADLINE):
                try:
                    frame = await self.capture()
                except CorralError as exc:  # the surface failed: its manager ends it
                    logger.info("recording %s: no frame (%s)", self.meta.id, exc)
        if frame is None:
            return False  # the surface did not answer in time: its next frame will
        self._seen = (notes, frame)
        return await self._write(frame, marks)

    def frame_since(self, notes: int) -> Frame | None:
        """The latest frame if it was taken (or offered) once `notes` timeline lines had
        been noted, else None: the screen after a timeline entry, for its thumbnail,
        without a capture of its own (a live recorder takes one after every line)."""
        if self._seen is None or self._seen[0] < notes:
            return None
        return self._seen[1]

    async def _write(self, frame: Frame, marks: tuple[Mark, ...]) -> bool:
        self._black(frame.blacked)
        digest = hashlib.sha256(frame.png).digest()
        if digest == self._last and not marks:
            return False
        if (free := _free(self.where)) < MIN_FREE_BYTES:
            self._stop(
                f"the disk holding {self.where.parent} has {free >> 20} MiB free, under the "
                f"{MIN_FREE_BYTES >> 20} MiB kept for the audit and sessions; free space and "
                "the next session is recorded again"
            )
            return False
        at_ms = int((self.clock() - self._t0) * 1000)
        try:
            await anyio.to_thread.run_sync(
                self._encode, frame.png, at_ms, marks, limiter=self.encoders
            )
        except (OSError, VideoError, ValueError) as exc:
            self._stop(f"the video could not be written ({str(exc)[:200]})")
            return False
        self._last = digest
        self._check_growth()
        return True

    def _encode(self, png: bytes, at_ms: int, marks: tuple[Mark, ...]) -> None:
        if self.closed:
            return
        if self._video is None:
            size = png_size(png)
            if size is None:
                raise ValueError("a frame was not a PNG")
            self._video = VideoFile(self.where / LIVE_VIDEO, size, self.fps)
            self.meta = self.meta.model_copy(update={"width": size[0], "height": size[1]})
        self._video.add(png, at_ms, marks)

    def _black(self, why: str | None) -> None:
        if why is not None and why != self._blacked:
            self.note({"event": "frame_blacked", "why": why[:300]})
        self._blacked = why

    def _check_growth(self) -> None:
        size = self._bytes()
        if size - self._written_at_check < GROWTH_CHECK_BYTES:
            return
        self._written_at_check = size
        over = self.on_grown()
        if over is not None:
            self._stop(over)

    def _bytes(self) -> int:
        try:
            return (self.where / LIVE_VIDEO).stat().st_size
        except OSError:
            return 0

    def _stop(self, why: str) -> None:
        """Stop recording (the session goes on), once; say why in the timeline."""
        if self.stopped:
            return
        self.stopped = why
        self.meta = self.meta.model_copy(update={"stopped": why})
        try:
            line = {"t": round(self.clock() - self._t0, 3), "at": time.time()}
            self._timeline.write(json.dumps(line | {"event": "recording_stopped", "why": why}))
            self._timeline.write("\n")
            self._timeline.flush()
        except OSError:
            pass  # the disk that stopped it may refuse this line too: the audit says it
        self._wake.set()
        self.on_stopped(why)

    # ------------------------------------------------------------------ the end
    async def last_frame(self) -> None:
        """The surface is about to end (the task no longer runs): a frame of the surface
        as it was left, when an action since the last frame waits for one (the AI's last
        inputs came within QUIET_SECONDS of the end) or none was taken at all. Bounded: an
        end never waits long on a surface that does not answer."""
        if self.stopped or self.closed:
            return
        if self._marks or self._offered is not None or self._last is None:
            with anyio.move_on_after(LAST_FRAME_DEADLINE):
                await self._frame()

    def close_sync(self, ended_by: str) -> RecordingMeta:
        """Close the video and the timeline, write the meta with the end (blocking: run in
        a worker thread once the task is cancelled)."""
        self.closed = True
        if self._video is not None:
            try:
                self._video.close()
            except (OSError, VideoError) as exc:  # what it wrote plays: finished below
                logger.warning("recording %s: the video did not close (%s)", self.meta.id, exc)
            try:
                self.store.finish_video(self.meta.id)
            except (OSError, VideoError) as exc:
                logger.warning("recording %s: the video was not finished (%s)", self.meta.id, exc)
        self._timeline.close()
        frames = 0 if self._video is None else self._video.frames
        self.meta = self.meta.model_copy(
            update={
                "ended_at": time.time(),
                "ended_by": ended_by,
                "frames": frames,
                "length_seconds": round(self.clock() - self._t0, 3),
            }
        )
        return self.meta


def _free(where: Path) -> int:
    try:
        return shutil.disk_usage(where).free
    except OSError:
        return 0
