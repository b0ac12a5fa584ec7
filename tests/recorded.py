"""A finished recording as the tests read it (issue 24): its meta and every frame of its
video, decoded (PyAV), and its length; the wait for a recording's encoder process to end."""

from __future__ import annotations

import io
import os
import select
from pathlib import Path

import av
from PIL import Image

from orchestrator.home import CorralHome
from orchestrator.recordings.store import RecordingMeta, RecordingStore


def png(colour: tuple[int, int, int], size: tuple[int, int] = (320, 200)) -> bytes:
    """A PNG of one colour, a recording's frame as the tests feed it."""
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format="PNG")
    return out.getvalue()


def frames(path: Path) -> list[tuple[float, Image.Image]]:
    """Every frame of a video file: (its time in s, its image)."""
    with av.open(str(path)) as video:
        return [(float(f.time or 0.0), f.to_image().convert("RGB")) for f in video.decode(video=0)]


def duration_ms(path: Path) -> int:
    """The time of a video's last frame (ms), 0 when it has none or cannot be read."""
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


EXIT_BOUND_S = 60.0  # a failure bound: the wait ends on the process's exit


def exited(pid: int) -> bool:
    """Wait for process `pid` (any process, a child or not: a recording's encoder) to exit:
    its pidfd turns readable then. Whether it did within EXIT_BOUND_S."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], EXIT_BOUND_S)
        return bool(readable)
    finally:
        os.close(fd)


def recorded(home: CorralHome, surface_id: str) -> tuple[RecordingMeta, list[Image.Image]]:
    """The recording of a session or rig that ended, and its frames."""
    store = RecordingStore(home.recordings_dir)
    return store.meta(surface_id), [img for _, img in frames(store.video(surface_id))]


def reddish(img: Image.Image, point: tuple[int, int]) -> bool:
    """The pixel is the tests' red (a secret field unmasked), as the codec renders it."""
    r, g, b = img.getpixel(point)
    return r > 200 and g < 70 and b < 70
