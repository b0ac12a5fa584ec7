"""A recording's encoder, in a process of its own (issue 23 item 6): PNG frames in, VP9 out
to the recording's IVF file (`orchestrator.recordings.video` says why IVF).

Why a process and not a thread of the gateway: a VP9 encoder holds about 90 MiB of frame
buffers at 1280x800 while its recording runs, and the first one maps some 14 MiB of
FFmpeg's and libvpx's code into whatever process runs it. In the gateway that was a
gigabyte at the peak of a soak with ten sessions and 14 MiB that stayed after they ended;
here it is this process's, and it goes when the recording ends. A crash or a kill of the
encoder (out of memory, a codec bug) stops that recording only: the gateway sees the pipe
close and the session goes on (`Recorder._stop`).

`python -m orchestrator.recordings.encoder PATH WIDTH HEIGHT FPS`, started by
`video.VideoFile`. On stdin, each request a JSON line, a frame's followed by its PNG bytes:

    {"at_ms": 1200, "marks": [["clicked", [40, 50], null]], "png": 51234}\\n<51234 bytes>
    {"close": true}\\n

On stdout, one JSON line answers the opening and each request: `{"ok": true, "frames": N}`
or `{"error": "..."}`. At the end of stdin (the gateway gone, killed or not) the file is
closed as it stands, so it plays up to its last frame.
"""

from __future__ import annotations

import io
import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO

import av
from PIL import Image

from sandboxes.recording import Mark, draw_marks_on, mark_boxes, marks_of

MS = Fraction(1, 1000)
PIX_FMT = "yuv420p"  # what VP9 encodes here
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
# with the steps around it), and the recorders run side by side, one process each.
LIBVPX_THREADS = 1
MAX_PNG_BYTES = 64 << 20  # a masked screenshot is a few MiB at most
ERRORS = (OSError, av.error.FFmpegError, ValueError)


class Encoder:
    """One recording's VP9 stream in its IVF file, opened at `size` (even, as VP9 needs;
    frames of another size are scaled to it)."""

    def __init__(self, path: Path, size: tuple[int, int], fps: int) -> None:
        self._out = av.open(str(path), "w", format="ivf", options=LIVE_OPTIONS)
        stream = self._out.add_stream("libvpx-vp9", rate=fps, options=dict(VP9_OPTIONS))
        stream.width, stream.height = size
        stream.pix_fmt = PIX_FMT
        stream.time_base = MS
        stream.codec_context.time_base = MS
        stream.codec_context.gop_size = fps * 4  # a key frame at least every 4 s of frames
        stream.codec_context.thread_count = LIBVPX_THREADS
        self.size = size
        self._stream = stream
        self._last_ms = -1
        self._closed = False
        self.frames = 0
        self._last: tuple[bytes, Image.Image, av.VideoFrame] | None = None  # the last PNG

    def add(self, png: bytes, at_ms: int, marks: tuple[Mark, ...] = ()) -> None:
        """Encode one masked frame (PNG) shown from `at_ms`, with `marks` drawn on it."""
        image, base = self._decoded(png)
        frame = marked_frame(image, base, marks)
        frame.pts = max(at_ms, self._last_ms + 1)  # strictly increasing
        frame.time_base = MS
        self._last_ms = frame.pts
        for packet in self._stream.encode(frame):
            self._out.mux(packet)
        self.frames += 1

    def _decoded(self, png: bytes) -> tuple[Image.Image, av.VideoFrame]:
        """The frame's pixels at the stream's size, RGB and as the encoder takes them
        (YUV 4:2:0). The same PNG as the last frame's (the screen unchanged, new marks on
        it: `channel_frame` reuses its frame) is neither decoded nor converted again."""
        if self._last is not None and self._last[0] == png:
            return self._last[1], self._last[2]
        with Image.open(io.BytesIO(png)) as opened:
            opened.load()
            image = opened if opened.mode == "RGB" else opened.convert("RGB")
        if image.size != self.size:
            image = image.resize(self.size, Image.Resampling.BILINEAR)
        base = av.VideoFrame.from_image(image).reformat(format=PIX_FMT)  # type: ignore[no-untyped-call]
        self._last = (png, image, base)
        return image, base

    def close(self) -> None:
        """Flush the encoder and close the file. Once only."""
        if self._closed:
            return
        self._closed = True
        try:
            for packet in self._stream.encode(None):
                self._out.mux(packet)
        finally:
            self._out.close()


def marked_frame(image: Image.Image, base: av.VideoFrame, marks: tuple[Mark, ...]) -> av.VideoFrame:
    """`base` (`image` in YUV 4:2:0) with `marks` drawn on it. Only the boxes the marks can
    touch (`mark_boxes`) are drawn on `image`'s pixels and converted; the rest is `base`'s
    planes copied. A 1280x800 frame with a click's mark: 14.7 -> 6 ms of CPU, most of it
    the whole frame's copy, its bytes and its colour conversion (issue 23: a recording takes
    a frame after each of an agent's pauses). Same pixels as converting the whole marked
    frame, but for the colour of a box's outermost pixels (the converter's filter reads
    across the box's edge there)."""
    if not marks:
        return base
    frame = av.VideoFrame(base.width, base.height, PIX_FMT)
    _paste(frame, base, (0, 0, base.width, base.height))
    for box in mark_boxes(marks, image.size):
        piece = image.crop(box)
        draw_marks_on(piece, marks, (box[0], box[1]), image.size)
        _paste(frame, av.VideoFrame.from_image(piece).reformat(format=PIX_FMT), box)  # type: ignore[no-untyped-call]
    return frame


def _paste(frame: av.VideoFrame, piece: av.VideoFrame, box: tuple[int, int, int, int]) -> None:
    """Copy `piece` (4:2:0, even-sized) into `frame` at `box`'s top left corner (even).
    Each plane row by row, each side's rows `line_size` apart (PyAV 18.1.1 pads the
    colour planes of a converted frame, not those of a new one); a whole plane of the same
    size and line size in one copy."""
    for index, (plane, source) in enumerate(zip(frame.planes, piece.planes, strict=True)):
        scale = 1 if index == 0 else 2  # the colour planes are half the size each way
        left, top = box[0] // scale, box[1] // scale
        width, rows = piece.width // scale, piece.height // scale
        into, source_bytes = memoryview(plane), memoryview(source)
        step, source_step = plane.line_size, source.line_size
        if (left, top) == (0, 0) and step == source_step and len(into) == len(source_bytes):
            into[:] = source_bytes
            continue
        for row in range(rows):
            at = (top + row) * step + left
            into[at : at + width] = source_bytes[row * source_step : row * source_step + width]


def _answer(out: BinaryIO, answer: dict[str, Any]) -> None:
    out.write(json.dumps(answer).encode() + b"\n")
    out.flush()


def serve(encoder: Encoder, inp: BinaryIO, out: BinaryIO) -> None:
    """Answer frame requests until a close or the end of `inp`; the file closed either way."""
    try:
        while line := inp.readline():
            request = json.loads(line)
            if request.get("close"):
                encoder.close()
                _answer(out, {"ok": True, "frames": encoder.frames})
                return
            size = int(request["png"])
            if not 0 < size <= MAX_PNG_BYTES:
                raise ValueError(f"a frame of {size} bytes")
            png = inp.read(size)
            if len(png) != size:
                return  # the gateway went mid-frame
            try:
                encoder.add(png, int(request["at_ms"]), marks_of(request.get("marks", [])))
            except ERRORS as exc:
                _answer(out, {"error": str(exc)[:300] or type(exc).__name__})
                continue
            _answer(out, {"ok": True, "frames": encoder.frames})
    finally:
        encoder.close()


def main(argv: list[str]) -> int:
    out = sys.stdout.buffer
    try:
        path, width, height, fps = Path(argv[0]), int(argv[1]), int(argv[2]), int(argv[3])
        encoder = Encoder(path, (width, height), fps)
    except (*ERRORS, IndexError) as exc:
        _answer(out, {"error": str(exc)[:300] or type(exc).__name__})
        return 1
    _answer(out, {"ok": True, "frames": 0})
    try:
        serve(encoder, sys.stdin.buffer, out)
    except BrokenPipeError:
        return 0  # the gateway went while an answer was written: the file is closed
    return 0


if __name__ == "__main__":
    av.logging.set_level(None)  # FFmpeg's own log lines: not in the gateway's log
    sys.exit(main(sys.argv[1:]))
