"""A recording's memory goes back once it is closed (issue 23 item 6): its VP9 encoder's
frame buffers (about 90 MiB at 1280x800) are let go at `VideoFile.close`, not when the
object is, and `orchestrator.surfaces.heap.give_back` returns the freed pages to the system. Run in
a child process of its own, whose resident memory is read from /proc."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.surfaces.heap import TRIM

pytestmark = pytest.mark.unit

CHILD = textwrap.dedent(
    """
    import io, json, sys
    from pathlib import Path
    import anyio
    from PIL import Image
    from orchestrator.surfaces.heap import give_back
    from orchestrator.recordings.video import VideoFile

    def rss_mib():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    frame = io.BytesIO()
    Image.new("RGB", (1280, 800), (200, 100, 50)).save(frame, "PNG")
    folder = Path(sys.argv[1])
    kept = []  # closed recordings whose objects are still held, as a gateway may hold them
    start = rss_mib()
    for n in range(3):
        video = VideoFile(folder / f"v{n}.ivf", (1280, 800), 10)
        for k in range(20):
            video.add(frame.getvalue(), k * 100)
        video.close()
        video.close()  # once only: a second close does nothing
        kept.append(video)
    anyio.run(give_back)
    print(json.dumps({"start": start, "end": rss_mib(), "frames": [v.frames for v in kept]}))
    """
)


@pytest.mark.skipif(TRIM is None, reason="this libc has no malloc_trim (not glibc)")
def test_three_closed_recordings_still_held_hold_no_encoder_memory(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    measured = json.loads(done.stdout)

    assert measured["frames"] == [20, 20, 20]
    # Each encoder held ~90 MiB while open: three held would be ~270 MiB more.
    assert measured["end"] - measured["start"] < 40, measured
