"""A recording's memory is never the gateway's (issue 23 item 6): its VP9 encoder's frame
buffers (about 90 MiB at 1280x800) and FFmpeg's code live in the recording's encoder
process (orchestrator.recordings.encoder), which ends at `VideoFile.close`, however long
the closed recording's object is held. Run in a child process standing for the gateway,
whose resident memory and its encoders' are read from /proc."""

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

    def rss_mib(pid="self"):
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    frame = io.BytesIO()
    Image.new("RGB", (1280, 800), (200, 100, 50)).save(frame, "PNG")
    folder = Path(sys.argv[1])
    kept = []  # closed recordings whose objects are still held, as a gateway may hold them
    start = rss_mib()
    videos = [VideoFile(folder / f"v{n}.ivf", (1280, 800), 10) for n in range(3)]
    for k in range(20):
        for video in videos:
            video.add(frame.getvalue(), k * 100)
    open_here = rss_mib()
    encoders = [rss_mib(video.pid) for video in videos]
    for video in videos:
        video.close()
        video.close()  # once only: a second close does nothing
        kept.append(video)
    anyio.run(give_back)
    print(json.dumps({
        "start": start, "open": open_here, "encoders": encoders, "end": rss_mib(),
        "frames": [v.frames for v in kept],
    }))
    """
)


@pytest.mark.skipif(TRIM is None, reason="this libc has no malloc_trim (not glibc)")
def test_three_recordings_encode_outside_and_hold_no_encoder_memory_closed(tmp_path: Path) -> None:
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
    # Each encoder holds ~90 MiB while open, in its own process: three in this one would
    # be ~270 MiB more here, and FFmpeg's code another 14.
    assert min(measured["encoders"]) > 60, measured
    assert measured["open"] - measured["start"] < 20, measured
    assert measured["end"] - measured["start"] < 20, measured
