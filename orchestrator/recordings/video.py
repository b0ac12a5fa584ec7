"""A recording's video: VP9, encoded with PyAV (FFmpeg's libvpx and muxers, bundled in its
wheels; no encoder of ours).

Frames come when the screen may have changed, not at a fixed rate, so each carries its own
time (milliseconds since the recording began: a variable frame rate).

While the session runs, the frames go to an IVF file (`video.ivf`), each one written and
flushed to the file as it is encoded: IVF is a plain sequence of frames, so a gateway
killed mid-session leaves a file that plays (ffprobe, PyAV, VLC) up to its last frame.
(A WebM file cannot be written that way: FFmpeg's Matroska muxer holds the newest cluster
in memory until the next frame comes, and frames here may be minutes apart.) `finish`
then writes the frames into a WebM file with its cues and duration, without re-encoding
(stream copy), which browsers play and seek in: at the session's end, at the next
gateway's start for a file a killed one left, and on demand for a live recording's
player (`orchestrator.recordings.store`).

The encoding runs in a process of its own per recording (`orchestrator.recordings.encoder`
says why); `VideoFile` is the gateway's end of it. The remux (`finish`) runs here, and is
where PyAV is imported: an MCP front lists and serves recordings through the store without
loading FFmpeg (~60 ms and ~17 MiB of each front's memory) until it remuxes one; a gateway
that records loads it as it starts (`load_remuxer`).

Blocking calls: the recorder runs them in a worker thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from sandboxes.recording import Mark, mark_fields

# The longest an encoder may take to open its file, take a frame or close: then it is
# killed and the recording stops (a frame takes ~10-40 ms of CPU; this is for a process
# stopped or starved for good, not a slow one).
ANSWER_DEADLINE = 60.0


class VideoError(Exception):
    """The recording's encoder failed, or is gone (the recording stops, the session not)."""


class VideoFile:
    """One recording's video, opened at its first frame's size (even, as VP9 needs; later
    frames of another size are scaled to it), encoded by a process of its own."""

    def __init__(self, path: Path, size: tuple[int, int], fps: int) -> None:
        self.path = path
        self.size = (max(2, size[0] - size[0] % 2), max(2, size[1] - size[1] % 2))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # owner-only
        os.close(fd)
        self.frames = 0
        self._closed = False
        argv = [sys.executable, "-m", "orchestrator.recordings.encoder", str(path)]
        argv += [str(self.size[0]), str(self.size[1]), str(fps)]
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the gateway's: a traceback of the encoder's lands in its log
            # Its own session: a Ctrl-C at the gateway's terminal reaches the gateway,
            # which closes each recording; the encoder ends when its stdin does.
            start_new_session=True,
        )
        try:
            self._exchange(b"")
        except VideoError:
            self._closed = True
            self._end()  # it answered why and exited: reaped here
            raise

    @property
    def pid(self) -> int:
        return self._proc.pid

    def add(self, png: bytes, at_ms: int, marks: tuple[Mark, ...] = ()) -> None:
        """Encode one masked frame (PNG) shown from `at_ms`, with `marks` drawn on it."""
        if self._closed:
            raise VideoError("the video is closed")
        request = {"at_ms": at_ms, "marks": [mark_fields(m) for m in marks], "png": len(png)}
        self._exchange(json.dumps(request).encode() + b"\n" + png)

    def close(self) -> None:
        """Flush the encoder and close the file (it plays; `finish` makes it seekable);
        the encoder's process ends, and its memory with it. Once only."""
        if self._closed:
            return
        self._closed = True
        try:
            self._exchange(b'{"close": true}\n')
        finally:
            self._end()

    def _exchange(self, request: bytes) -> None:
        """Send `request` (nothing: read the opening's answer) and read the answer; the
        process is killed when it does not answer within ANSWER_DEADLINE."""
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        watchdog = threading.Timer(ANSWER_DEADLINE, proc.kill)
        watchdog.start()
        try:
            if request:
                proc.stdin.write(request)
                proc.stdin.flush()
            line = proc.stdout.readline()
        except OSError as exc:
            raise VideoError(f"the encoder is gone ({exc}){self._ended()}") from None
        finally:
            watchdog.cancel()
        if not line:
            raise VideoError(f"the encoder is gone{self._ended()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise VideoError(f"the encoder could not go on: {answer['error']}")
        self.frames = int(answer.get("frames", self.frames))

    def _ended(self) -> str:
        """How the encoder's process ended (it is reaped), for an error message."""
        self._closed = True
        code = self._end()
        if code is None:
            return ""
        return f": killed by signal {-code}" if code < 0 else f": exit status {code}"

    def _end(self) -> int | None:
        """Close our ends of the pipes and reap the process (killed if it lingers)."""
        for pipe in (self._proc.stdin, self._proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        try:
            return self._proc.wait(timeout=ANSWER_DEADLINE)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            return self._proc.wait()


def load_remuxer() -> None:
    """Load PyAV now: a gateway that records remuxes every recording as it ends, so it
    loads FFmpeg as it starts rather than on the first session's stop."""
    import av  # noqa: F401  (the import is the point)


def finish(live: Path, path: Path) -> int:
    """Write the frames of `live` (IVF) to `path` (WebM, with its cues and duration; stream
    copy, no re-encoding), keeping every whole frame of a file cut short; the number of
    frames kept. With no readable frame, `path` is not written (0). A file FFmpeg cannot
    read or write raises VideoError (or the OSError it is)."""
    import av  # here: see the module's docstring

    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")  # one per writer
    try:
        return _remux(av, live, path, tmp)
    # PyAV raises ValueError for a stream it cannot copy (garbage where frames should be).
    except (av.error.FFmpegError, ValueError) as exc:
        if isinstance(exc, OSError):
            raise
        raise VideoError(f"the video could not be finished ({exc})") from exc
    finally:
        tmp.unlink(missing_ok=True)  # already gone when it became `path`


def _remux(av: Any, live: Path, path: Path, tmp: Path) -> int:
    kept = 0
    with av.open(str(live), format="ivf") as src:
        if not src.streams.video:
            return 0
        source = src.streams.video[0]
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        with av.open(str(tmp), "w", format="webm") as dst:
            target = dst.add_stream_from_template(source)
            try:
                for packet in src.demux(source):
                    if packet.dts is None or packet.size == 0:
                        continue
                    packet.stream = target
                    dst.mux(packet)
                    kept += 1
            except av.error.FFmpegError:
                pass  # a torn last cluster: keep what came before it
    if kept:
        os.replace(tmp, path)
    return kept
