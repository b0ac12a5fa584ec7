"""A recording's encoder runs in a process of its own (orchestrator.recordings.encoder,
issue 23 item 6), for real (PyAV's libvpx, real files, real processes): a frame it cannot
take is refused and the next one taken; an encoder killed mid-recording stops that
recording only, with the reason, and what it wrote is still finished into a video that
plays. (An encoder whose gateway was killed closes its file and ends:
tests/unit/test_recording_files.py, the killed writer.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from orchestrator.recordings.recorder import Frame, Recorder
from orchestrator.recordings.store import LIVE_VIDEO, VIDEO, RecordingMeta, RecordingStore
from orchestrator.recordings.video import VideoError, VideoFile
from sandboxes.recording import Mark
from tests.recorded import exited, frames, png

pytestmark = pytest.mark.anyio


def test_a_frame_the_encoder_cannot_take_is_refused_and_the_next_taken(tmp_path: Path) -> None:
    video = VideoFile(tmp_path / LIVE_VIDEO, (320, 200), 4)
    with pytest.raises(VideoError, match="could not go on"):
        video.add(b"not a png at all", 0)
    video.add(png((0, 200, 0)), 500)
    video.close()
    assert video.frames == 1 and len(frames(tmp_path / LIVE_VIDEO)) == 1
    assert exited(video.pid)


def test_the_same_screen_again_carries_only_its_own_marks(tmp_path: Path) -> None:
    """A frame of unchanged pixels is the last frame's PNG again (its decode reused in the
    encoder): each carries its own action's mark, never the one before's."""
    video = VideoFile(tmp_path / LIVE_VIDEO, (320, 200), 4)
    white = png((255, 255, 255))
    video.add(white, 0, (Mark("click", (60, 100)),))
    video.add(white, 500, (Mark("click", (260, 100)),))
    video.close()
    (_, first), (_, second) = frames(tmp_path / LIVE_VIDEO)
    marked = lambda img, x: img.getpixel((x, 100))[1] < 200  # noqa: E731 - a ring's centre
    assert marked(first, 60) and not marked(first, 260)
    assert marked(second, 260) and not marked(second, 60)


def test_each_recording_has_its_encoder_process_until_it_closes(tmp_path: Path) -> None:
    videos = [VideoFile(tmp_path / f"v{n}.ivf", (320, 200), 4) for n in range(2)]
    assert len({v.pid for v in videos} | {os.getpid()}) == 3
    for n, video in enumerate(videos):
        video.add(png((40 * n, 0, 0)), 0)
        video.close()
        video.close()  # once only
        with pytest.raises(ProcessLookupError):
            os.kill(video.pid, 0)  # ended and reaped by close
    assert [len(frames(tmp_path / f"v{n}.ivf")) for n in range(2)] == [1, 1]


async def test_an_encoder_killed_mid_recording_stops_that_recording_only(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path)
    meta = RecordingMeta(id="k1", agent="a", surface="kiosk", seat="a", started_at=time.time())
    store.create(meta)
    send, taken = anyio.create_memory_object_stream[int](16)
    colours = iter([(255, 0, 0), (255, 0, 0), (0, 0, 255), (0, 0, 255)])

    async def capture() -> Frame:
        send.send_nowait(1)
        return Frame(png(next(colours)))

    stopped = anyio.Event()
    reasons: list[str] = []

    def on_stopped(why: str) -> None:
        reasons.append(why)
        stopped.set()

    recorder = Recorder(store, meta, capture, 4, on_stopped=on_stopped)
    with send, taken:
        await record_until_the_encoder_is_killed(recorder, taken, stopped)
    assert reasons == [recorder.stopped]
    assert "the video could not be written" in reasons[0] and "signal 9" in reasons[0]
    ended = recorder.close_sync("stopped by the agent")
    assert ended.stopped == reasons[0] and ended.frames == 1
    assert len(frames(tmp_path / "k1" / VIDEO)) == 1  # what it wrote, finished: it plays


async def record_until_the_encoder_is_killed(
    recorder: Recorder, taken: MemoryObjectReceiveStream[int], stopped: anyio.Event
) -> None:
    """The recorder's first frame written, its encoder killed, the next frame taken: until
    the recording stops."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run)
        recorder.poke()  # red written, red again: still
        with anyio.fail_after(30):
            await taken.receive()
            await taken.receive()
        video = recorder._video
        assert video is not None and video.frames == 1
        os.kill(video.pid, signal.SIGKILL)
        assert exited(video.pid)
        recorder.poke()  # blue: the encoder is gone
        with anyio.fail_after(30):
            await stopped.wait()
        tg.cancel_scope.cancel()


def test_an_encoder_started_wrong_says_why_and_exits_1(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.recordings.encoder", str(tmp_path / "v.ivf")],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "error" in json.loads(done.stdout), done.stderr
    assert not (tmp_path / "v.ivf").exists()


def test_a_marked_frame_is_the_whole_marked_frame_converted_but_at_its_boxes_edges() -> None:
    """The encoder converts only the boxes the marks touch (`marked_frame`): its frame is
    the whole marked image converted to 4:2:0 (PyAV's own), luma for luma everywhere, and
    colour for colour but on a box's outermost colour pixels (the converter filters across
    that edge, where both sides are unmarked). A noisy image: the worst case for that."""
    import random

    import av
    from PIL import Image

    from orchestrator.recordings.encoder import PIX_FMT, marked_frame
    from sandboxes.recording import draw_marks, mark_boxes

    rng = random.Random(7)
    size = (320, 200)
    image = Image.frombytes("RGB", size, bytes(rng.randrange(256) for _ in range(320 * 200 * 3)))
    base = av.VideoFrame.from_image(image).reformat(format=PIX_FMT)
    marks = (Mark("a", (5, 5)), Mark("b", (300, 190), "down"), Mark("c", (160, 100), "left"))
    assert marked_frame(image, base, ()) is base
    fast = marked_frame(image, base, marks)
    whole = av.VideoFrame.from_image(draw_marks(image, marks)).reformat(format=PIX_FMT)
    assert _rows(fast.planes[0]) == _rows(whole.planes[0])
    edges = set()
    for left, top, right, bottom in mark_boxes(marks, size):
        cols, rows = range(left // 2, right // 2), range(top // 2, bottom // 2)
        edges |= {(x, y) for x in cols for y in (rows[0], rows[-1])}
        edges |= {(x, y) for y in rows for x in (cols[0], cols[-1])}
    for index in (1, 2):  # each plane's pixels, not its rows' padding (PyAV 18.1.1 pads
        ours, theirs = _rows(fast.planes[index]), _rows(whole.planes[index])  # converted ones)
        differ = {
            (x, y)
            for y, (mine, other) in enumerate(zip(ours, theirs, strict=True))
            for x in range(len(mine))
            if mine[x] != other[x]
        }
        assert differ and differ <= edges, sorted(differ - edges)[:10]
    assert bytes(base.planes[0]) == bytes(
        av.VideoFrame.from_image(image).reformat(format=PIX_FMT).planes[0]
    )


def _rows(plane: Any) -> list[bytes]:
    """A plane's rows of pixels, without the padding at the end of each (`line_size`)."""
    data = memoryview(plane)
    return [
        bytes(data[y * plane.line_size : y * plane.line_size + plane.width])
        for y in range(plane.height)
    ]
