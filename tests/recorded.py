"""A finished recording as the tests read it (issue 24): its meta and every frame of its
video, decoded (PyAV)."""

from __future__ import annotations

from pathlib import Path

import av
from PIL import Image

from orchestrator.home import CorralHome
from orchestrator.recordings.store import RecordingMeta, RecordingStore


def frames(path: Path) -> list[tuple[float, Image.Image]]:
    """Every frame of a video file: (its time in s, its image)."""
    with av.open(str(path)) as video:
        return [(float(f.time or 0.0), f.to_image().convert("RGB")) for f in video.decode(video=0)]


def recorded(home: CorralHome, surface_id: str) -> tuple[RecordingMeta, list[Image.Image]]:
    """The recording of a session or rig that ended, and its frames."""
    store = RecordingStore(home.recordings_dir)
    return store.meta(surface_id), [img for _, img in frames(store.video(surface_id))]


def reddish(img: Image.Image, point: tuple[int, int]) -> bool:
    """The pixel is the tests' red (a secret field unmasked), as the codec renders it."""
    r, g, b = img.getpixel(point)
    return r > 200 and g < 70 and b < 70
