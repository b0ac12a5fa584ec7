"""A recording's files, written for real (PyAV's libvpx and Matroska muxer, real files):
a writer killed with SIGKILL leaves a video that plays up to its last second, which
`finish` makes seekable; the store's modes, export manifest, retention and orphans; the
recorder takes frames only when the screen changed (its capture scripted here; the real
capture is the screenshot path, tested end to end in tests/e2e/test_recordings.py)."""

from __future__ import annotations

import contextlib
import io
import json
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import av
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from PIL import Image

from orchestrator.recordings.recorder import Frame, Recorder
from orchestrator.recordings.store import (
    LIVE_VIDEO,
    META,
    TIMELINE,
    VIDEO,
    RecordingMeta,
    RecordingStore,
    session_audit,
)
from orchestrator.recordings.use import QUIET_SECONDS
from orchestrator.recordings.video import VideoFile, finish
from sandboxes.recording import Mark
from tests.recorded import duration_ms, exited, png

pytestmark = pytest.mark.anyio


def frames_of(path: Path) -> list[tuple[int, Image.Image]]:
    with av.open(str(path)) as video:
        return [(int(f.pts or 0), f.to_image()) for f in video.decode(video=0)]


KILLED_WRITER = """
import os, sys
from collections.abc import AsyncIterator
from pathlib import Path
from orchestrator.recordings.video import VideoFile
video = VideoFile(Path(sys.argv[1]), (320, 200), 4)
frames = [bytes.fromhex(h) for h in sys.stdin.read().split()]
for i, data in enumerate(frames):
    video.add(data, i * 500)
print("written", video.pid, flush=True)
sys.stdin.close()
os.kill(os.getpid(), 9)
"""


def test_a_writer_killed_mid_recording_leaves_a_video_that_plays_and_finish_seeks(
    tmp_path: Path,
) -> None:
    path = tmp_path / LIVE_VIDEO
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)] * 5  # 10 s of frames
    feed = " ".join(png(c).hex() for c in colours)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(path)],
        input=feed,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9 and "written" in killed.stdout, killed.stderr
    assert exited(int(killed.stdout.split()[1]))  # its encoder closed the file and ended
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    decoded = frames_of(path)  # plays as the killed writer left it
    assert len(decoded) >= len(colours) - 4  # at most the last second's cluster lost
    assert decoded[0][1].getpixel((160, 100))[0] > 200  # the first frame is red
    before = duration_ms(path)
    assert before >= 8000
    assert finish(path, tmp_path / VIDEO) == len(decoded)
    with av.open(str(tmp_path / VIDEO)) as video:
        assert video.duration is not None and video.duration / 1_000_000 >= 8  # cues: seekable
        video.seek(6_000, stream=video.streams.video[0])
        assert next(iter(video.decode(video=0))).pts is not None
    assert duration_ms(tmp_path / VIDEO) == before


def test_frames_of_another_size_are_scaled_and_marks_drawn(tmp_path: Path) -> None:
    video = VideoFile(tmp_path / LIVE_VIDEO, (321, 201), 4)  # odd: VP9 wants even
    video.add(png((0, 0, 0), (321, 201)), 0, (Mark("clicked", (160, 100)),))
    video.add(png((255, 255, 255), (640, 400)), 500)
    video.close()
    (_, marked), (_, white) = frames_of(tmp_path / LIVE_VIDEO)
    assert marked.size == (320, 200) and white.getpixel((10, 10))[0] > 230
    r, g, b = marked.getpixel((160 + 13, 100))
    assert r > 150 and g < 110 and b > 110, (r, g, b)  # the ring's magenta


def test_frames_in_every_png_mode_keep_their_colours(tmp_path: Path) -> None:
    """An RGB frame is encoded as decoded, any other mode (alpha, palette, grey) converted:
    each comes out in its own colour, marks drawn on either kind."""
    made = [
        Image.new("RGB", (320, 200), (250, 20, 20)),
        Image.new("RGBA", (320, 200), (20, 250, 20, 255)),
        Image.new("RGB", (320, 200), (20, 20, 250)).convert("P"),
        Image.new("L", (320, 200), 128),
    ]
    video = VideoFile(tmp_path / LIVE_VIDEO, (320, 200), 4)
    for i, image in enumerate(made):
        out = io.BytesIO()
        image.save(out, format="PNG")
        video.add(out.getvalue(), i * 500, (Mark("clicked", (40, 40)),) if i % 2 else ())
    video.close()
    colours = [image.getpixel((160, 100)) for _, image in frames_of(tmp_path / LIVE_VIDEO)]
    expected = [(250, 20, 20), (20, 250, 20), (20, 20, 250), (128, 128, 128)]
    assert len(colours) == len(expected)
    for got, want in zip(colours, expected, strict=True):
        assert all(abs(g - w) <= 24 for g, w in zip(got, want, strict=True)), (got, want)


def meta(rid: str, started: float, **more: object) -> RecordingMeta:
    return RecordingMeta(
        id=rid, agent="ann", surface="kiosk", seat="ann", started_at=started, **more
    )  # type: ignore[arg-type]


def test_the_store_is_owner_only_exports_a_manifest_and_prunes(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "recordings")
    where = store.create(meta("k1", time.time() - 10, ended_at=time.time()))
    (where / VIDEO).write_bytes(b"x" * 3000)
    (where / TIMELINE).write_text('{"t":0.1,"tool":"computer_click"}\n{"torn')
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert stat.S_IMODE((where / META).stat().st_mode) == 0o600
    assert store.timeline("k1") == [{"t": 0.1, "tool": "computer_click"}]  # torn line left out

    events = [
        {"event": "computer_action", "details": {"session": "k1"}},
        {"event": "computer_action", "details": {"session": "k2"}},
        {"event": "rig_action", "details": {"rig": "k1"}},
    ]
    lines = session_audit(events, "k1")
    assert [json.loads(line)["event"] for line in lines] == ["computer_action", "rig_action"]
    out = tmp_path / "export"
    sums = store.export("k1", out, lines)
    assert set(sums) == {VIDEO, TIMELINE, META, "audit.jsonl"}
    check = subprocess.run(
        ["sha256sum", "-c", "MANIFEST.sha256"], cwd=out, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    (out / VIDEO).write_bytes(b"tampered")
    check = subprocess.run(["sha256sum", "-c", "MANIFEST.sha256"], cwd=out, capture_output=True)
    assert check.returncode != 0

    old = store.create(meta("k0", time.time() - 40 * 86400, ended_at=time.time()))
    (old / VIDEO).write_bytes(b"x")
    big = store.create(meta("k2", time.time() - 5, ended_at=time.time()))
    (big / VIDEO).write_bytes(b"x" * (3 << 20))
    live = store.create(meta("k3", time.time() - 20))
    (live / VIDEO).write_bytes(b"x" * (20 << 20))
    assert store.prune(["k3"], keep_days=30, max_total_mb=16) == ["k0", "k1", "k2"]
    assert [m.id for m in store.all()] == ["k3"]  # the live one stays, though over the bound


def test_a_killed_gateways_recording_is_finished_by_the_next(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path)
    where = store.create(meta("k9", time.time() - 60))
    video = VideoFile(where / LIVE_VIDEO, (320, 200), 4)
    for i in range(8):
        video.add(png((i * 30, 0, 0)), i * 500)
    video.close()
    (where / TIMELINE).write_text(json.dumps({"t": 3.0, "at": time.time() - 57}) + "\n")
    assert store.finish_orphans(["other"]) == ["k9"]
    ended = store.meta("k9")
    assert ended.ended_by == "the gateway was killed" and ended.ended_at is not None
    assert ended.bytes > 0 and len(frames_of(where / VIDEO)) == 8
    assert not (where / LIVE_VIDEO).exists()
    assert store.finish_orphans([]) == []  # once


async def test_the_recorder_writes_a_frame_only_when_the_screen_changed(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path)
    store.create(meta("k5", time.time()))
    screens = [png((255, 0, 0))] * 3 + [png((0, 255, 0))] * 3
    taken: list[int] = []

    async def capture() -> Frame:
        taken.append(1)
        return Frame(screens[min(len(taken), len(screens)) - 1])

    stopped: list[str] = []
    recorder = Recorder(store, meta("k5", time.time()), capture, 15, on_stopped=stopped.append)
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run)
        recorder.poke()  # red, then red again: still; one frame written
        with anyio.fail_after(10):
            while len(taken) < 2:
                await anyio.sleep(0.01)
        assert len(taken) == 2
        recorder.poke(Mark("clicked", (10, 10)))  # the same red, but a mark: written
        recorder.note({"tool": "computer_click", "step": "click", "outcome": "ok", "actor": "ai"})
        with anyio.fail_after(10):
            while len(taken) < 5:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    recorded = recorder.close_sync("stopped by the agent")
    assert recorded.frames == len(frames_of(tmp_path / "k5" / VIDEO)) == 3  # red, marked, green
    assert recorded.actions == 1 and recorded.ended_by == "stopped by the agent"
    assert not stopped


def test_the_recording_counts_actions_approvals_and_take_overs_by_kind_not_text(
    tmp_path: Path,
) -> None:
    """An approval counts because it was raised as one, not because of its outcome's
    words: an action whose outcome merely says "held for an operator" is an action."""
    store = RecordingStore(tmp_path)
    store.create(meta("k6", time.time()))

    async def capture() -> Frame:
        return Frame(png((0, 0, 0)))

    recorder = Recorder(store, meta("k6", time.time()), capture, 4, on_stopped=lambda _: None)
    step = {"step": "click", "actor": "ai"}
    recorder.note({"tool": "computer_click", "outcome": "held for an operator (pay)", **step})
    recorder.note(
        {"tool": "computer_click", "outcome": "held for an operator (pay)", **step}, approval=True
    )
    recorder.note({"tool": "takeover", "outcome": "ok", "step": "", "actor": "ann"})
    recorder.note({"tool": "handback", "outcome": "ok", "step": "", "actor": "ann"})
    recorder.note({"tool": "computer_type", "outcome": "ok", "step": "type", "actor": "ann"})
    recorded = recorder.close_sync("stopped by the agent")
    assert (recorded.actions, recorded.approvals, recorded.takeovers) == (1, 1, 1)


def test_a_live_recordings_video_so_far_is_copied_again_only_after_a_new_frame(
    tmp_path: Path,
) -> None:
    store = RecordingStore(tmp_path)
    store.create(meta("k7", time.time()))
    video = VideoFile(store.dir_of("k7") / LIVE_VIDEO, (320, 200), 4)
    try:
        video.add(png((255, 0, 0)), 0)
        first = store.video("k7")
        made = first.stat().st_ino
        assert store.video("k7").stat().st_ino == made  # nothing new: the same copy
        assert len(frames_of(first)) == 1
        video.add(png((0, 255, 0)), 500)
        again = store.video("k7")
        assert again.stat().st_ino != made and len(frames_of(again)) == 2
    finally:
        video.close()


def test_a_recording_has_a_video_once_a_frame_is_written(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path)
    store.create(meta("k8", time.time()))
    assert not store.has_video("k8")  # nothing yet
    video = VideoFile(store.dir_of("k8") / LIVE_VIDEO, (320, 200), 4)
    try:
        assert not store.has_video("k8")  # the live file, its header alone
        video.add(png((255, 0, 0)), 0)
        assert store.has_video("k8")
    finally:
        video.close()
    store.finish_video("k8")
    assert store.has_video("k8") and (store.dir_of("k8") / VIDEO).is_file()


def acting_recorder(
    store: RecordingStore, rid: str, now: list[float]
) -> tuple[Recorder, MemoryObjectSendStream[bool], MemoryObjectReceiveStream[bool]]:
    """A recorder of a new recording on a clock the test moves; each capture says on
    `taken` whether no call of the AI's used the surface when it was taken."""
    store.create(meta(rid, time.time()))
    send, taken = anyio.create_memory_object_stream[bool](16)

    async def capture() -> Frame:
        send.send_nowait(not recorder.use.busy)
        return Frame(png((0, 90, 0)))

    recorder = Recorder(
        store, meta(rid, time.time()), capture, 4, on_stopped=lambda _: None, clock=lambda: now[0]
    )
    return recorder, send, taken


@contextlib.asynccontextmanager
async def running(recorder: Recorder) -> AsyncIterator[None]:
    """The recorder's task while the block runs, cancelled at its end (the surface's)."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run)
        yield
        tg.cancel_scope.cancel()


async def first_frame_written(recorder: Recorder, taken: MemoryObjectReceiveStream[bool]) -> None:
    """Poke a running recorder with no call under way: its first frame, then the same
    screen again (still): it waits for its next poke once this returns."""
    recorder.poke()
    with anyio.fail_after(10):
        assert [await taken.receive(), await taken.receive()] == [True, True]
    await anyio.wait_all_tasks_blocked()


async def test_the_recorders_first_frame_is_taken_though_the_ai_acts_from_the_start(
    tmp_path: Path,
) -> None:
    """A recording begins with the surface as it started: its first capture waits for no
    call (deferred, an AI acting back to back from the start could leave a recording with
    no frame at all)."""
    store = RecordingStore(tmp_path)
    now = [1000.0]
    recorder, send, taken = acting_recorder(store, "k10", now)
    with send, taken:
        async with running(recorder):
            with recorder.use.acting():
                recorder.poke()
                with anyio.fail_after(10):
                    assert await taken.receive() is False  # taken while the call runs
            now[0] += QUIET_SECONDS  # then, once the call ended and it was quiet: still
            with anyio.fail_after(10):
                assert await taken.receive() is True
    assert recorder.close_sync("stopped by the agent").frames == 1


async def test_the_recorder_takes_no_frame_while_an_ais_call_uses_the_surface(
    tmp_path: Path,
) -> None:
    """Once the first frame is written: its quiet time long past by the clock, a poke
    during the call would have taken a frame at once (the quiet counted from the AI's last
    answer); it waits for the call's end, then QUIET_SECONDS more."""
    store = RecordingStore(tmp_path)
    now = [1000.0]
    recorder, send, taken = acting_recorder(store, "k9", now)
    with send, taken:
        async with running(recorder):
            await first_frame_written(recorder, taken)
            with recorder.use.acting():
                recorder.poke()
                now[0] += 60  # long quiet by the clock, but the call still runs
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(anyio.WouldBlock):
                    taken.receive_nowait()
            now[0] += QUIET_SECONDS  # the call's end, then its quiet time
            with anyio.fail_after(10):
                assert await taken.receive() is True
    recorder.close_sync("stopped by the agent")


async def test_a_recording_ends_with_the_surface_as_the_ais_last_inputs_left_it(
    tmp_path: Path,
) -> None:
    """Inputs within the quiet time of the surface's end have no frame yet: the end takes
    one, with their marks; with nothing waiting it takes none."""
    store = RecordingStore(tmp_path)
    recorder, send, taken = acting_recorder(store, "k11", [1000.0])
    with send, taken:
        async with running(recorder):
            await first_frame_written(recorder, taken)
            with recorder.use.acting():  # an input, just before the end: still in its quiet
                recorder.poke(Mark("clicked", (40, 40)))
        await recorder.last_frame()  # the surface ends: its task was stopped first
        assert taken.receive_nowait() is True
        await recorder.last_frame()  # nothing waits for a frame now
        with pytest.raises(anyio.WouldBlock):
            taken.receive_nowait()
    assert recorder.close_sync("stopped by the agent").frames == 2
    (_, first), (_, last) = frames_of(store.dir_of("k11") / VIDEO)
    assert first.getpixel((40 + 13, 40)) != last.getpixel((40 + 13, 40))  # the click's ring


async def test_the_screen_after_a_timeline_line_is_a_frame_begun_once_it_was_noted(
    tmp_path: Path,
) -> None:
    """`frame_since` gives a timeline entry's thumbnail the recorder's frame instead of a
    capture of its own: only a frame taken (or offered) once the entry's line was noted,
    never an earlier screen written after it."""
    store = RecordingStore(tmp_path)
    recorder, send, taken = acting_recorder(store, "k12", [1000.0])
    with send, taken:
        assert recorder.frame_since(0) is None  # no frame yet
        recorder.note({"tool": "computer_screenshot"}, Frame(png((1, 2, 3))))  # line 1
        recorder.note({"tool": "computer_click"})  # line 2, before that frame is written
        assert await recorder._frame()  # the screenshot offered with line 1
        shot = recorder.frame_since(1)
        assert shot is not None and shot.png == png((1, 2, 3))
        assert recorder.frame_since(2) is None  # the screen before the click
        assert await recorder._frame()  # a capture begun after line 2
        assert taken.receive_nowait() is True
        after = recorder.frame_since(2)
        assert after is not None and after.png == png((0, 90, 0))
    recorder.close_sync("stopped by the agent")


FRONT_IMPORTS = """
import sys
import mcp_front.server
from orchestrator.recordings.store import RecordingStore
loaded = "av" in sys.modules
store = RecordingStore(__import__("pathlib").Path(sys.argv[1]))
for rid in sys.argv[2:]:
    try:
        store.video(rid)
    except Exception as exc:
        print(loaded, "av" in sys.modules, type(exc).__name__)
"""


def test_a_front_loads_ffmpeg_only_to_remux_and_a_torn_file_is_a_recordings_error(
    tmp_path: Path,
) -> None:
    """An MCP front imports the recordings' store (it lists and serves recordings) but not
    PyAV, ~17 MiB and ~60 ms of every front's start, until it remuxes a live recording's
    frames. A live file FFmpeg cannot read (torn in its header, or no frames at all) is the
    store's "no video", not FFmpeg's error, and the remux leaves no file behind."""
    store = RecordingStore(tmp_path)
    store.create(meta("t1", time.time()))
    (store.dir_of("t1") / LIVE_VIDEO).write_bytes(b"DKIF" + b"\x00" * 60)  # a header, torn
    store.create(meta("t2", time.time()))
    (store.dir_of("t2") / LIVE_VIDEO).write_bytes(b"not frames " * 8)
    done = subprocess.run(
        [sys.executable, "-c", FRONT_IMPORTS, str(tmp_path), "t1", "t2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == ["False", "True", "RecordingError"] * 2, done.stderr
    for rid in ("t1", "t2"):
        assert sorted(p.name for p in store.dir_of(rid).iterdir()) == [META, LIVE_VIDEO]
