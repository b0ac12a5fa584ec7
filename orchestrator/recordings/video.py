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

Blocking calls: the recorder runs them in a worker thread.
"""

from __future__ import annotations

import io
import os
import uuid
from fractions import Fraction
from pathlib import Path

import av
from PIL import Image

from sandboxes.recording import Mark, draw_marks

MS = Fraction(1, 1000)
LIVE_OPTIONS = {"flush_packets": "1"}
VP9_OPTIONS = {
    "deadline": "realtime",
    "cpu-used": "8",
    "row-mt": "1",
    "lag-in-frames": "0",
    "crf": "36",
    "b": "0",
    # libvpx's mode for screen content (text, flat areas, no camera noise): a frame of a
    # desktop costs a little less to encode and ~10 % fewer bytes (issue 23 item 6).
    "tune-content": "screen",
}
# One thread per encoder. At these sizes in realtime mode libvpx's own threads cost more
# CPU handing rows over than they save (measured: 14-15 -> 11 ms of CPU a 1280x800 frame
# with the steps around it), and the recorders already run side by side on the
# recordings' encoder threads (`orchestrator.recordings.service`).
LIBVPX_THREADS = 1


class VideoFile:
    """One recording's video, opened at its first frame's size (even, as VP9 needs; later
    frames of another size are scaled to it)."""

    def __init__(self, path: Path, size: tuple[int, int], fps: int) -> None:
        self.path = path
        self.size = (max(2, size[0] - size[0] % 2), max(2, size[1] - size[1] % 2))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # owner-only
        os.close(fd)
        self._out = av.open(str(path), "w", format="ivf", options=LIVE_OPTIONS)
        stream = self._out.add_stream("libvpx-vp9", rate=fps, options=dict(VP9_OPTIONS))
        stream.width, stream.height = self.size
        stream.pix_fmt = "yuv420p"
        stream.time_base = MS
        stream.codec_context.time_base = MS
        stream.codec_context.gop_size = fps * 4  # a key frame at least every 4 s of frames
        stream.codec_context.thread_count = LIBVPX_THREADS
        self._stream = stream
        self._last_ms = -1
        self._closed = False
        self.frames = 0

    def add(self, png: bytes, at_ms: int, marks: tuple[Mark, ...] = ()) -> None:
        """Encode one masked frame (PNG) shown from `at_ms`, with `marks` drawn on it."""
        with Image.open(io.BytesIO(png)) as opened:
            # An RGB frame (every masked screenshot so far) is used as decoded: no copy
            # (the frame below copies it while the file is open).
            image = opened if opened.mode == "RGB" else opened.convert("RGB")
            if image.size != self.size:
                image = image.resize(self.size, Image.Resampling.BILINEAR)
            frame = av.VideoFrame.from_image(draw_marks(image, marks))  # type: ignore[no-untyped-call]
        frame.pts = max(at_ms, self._last_ms + 1)  # strictly increasing
        frame.time_base = MS
        self._last_ms = frame.pts
        for packet in self._stream.encode(frame):
            self._out.mux(packet)
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and close the file (it plays; `finish` makes it seekable).
        The encoder is let go here, not when this object is: a closed recording's object
        may be held a while longer, and its VP9 encoder holds about 90 MiB of frame
        buffers at 1280x800 until its last reference goes (issue 23 item 6). Once only."""
        if self._closed:
            return
        self._closed = True
        try:
            for packet in self._stream.encode(None):
                self._out.mux(packet)
        finally:
            self._out.close()
            del self._stream, self._out


def finish(live: Path, path: Path) -> int:
    """Write the frames of `live` (IVF) to `path` (WebM, with its cues and duration; stream
    copy, no re-encoding), keeping every whole frame of a file cut short; the number of
    frames kept. With no readable frame, `path` is not written (0)."""
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")  # one per writer
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
    else:
        tmp.unlink(missing_ok=True)
    return kept


def duration_ms(path: Path) -> int:
    """The time of the last frame in `path` (ms), 0 when it has none."""
    last = 0
    try:
        with av.open(str(path)) as src:
            if not src.streams.video:
                return 0
            for packet in src.demux(src.streams.video[0]):
                if packet.pts is not None and packet.time_base is not None:
                    last = max(last, int(packet.pts * packet.time_base * 1000))
    except av.error.FFmpegError:
        pass
    return last
