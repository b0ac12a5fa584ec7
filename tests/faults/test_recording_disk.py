"""The disk of CORRAL_HOME filling up under a recorded kiosk session (issue 24): the
recording stops and says why in its timeline and the audit, and the session goes on (its
actions still audited: the recording keeps `MIN_FREE_BYTES` free for them); the video
recorded so far plays.

CORRAL_HOME is a tmpfs of its own, mounted by the test and filled by it: never the
machine's own disk."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import av
import pytest

from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from orchestrator.recordings.recorder import MIN_FREE_BYTES
from orchestrator.recordings.store import RecordingStore
from tests.e2e.conftest import connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import call, text_of, write_agent
from tests.faults import home_on_tmpfs

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT = "recfull"
SIZE_MB = (MIN_FREE_BYTES >> 20) + 96


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[CorralHome]:
    with home_on_tmpfs(tmp_path / "small", SIZE_MB) as home:
        write_agent(home, AGENT)
        yield home


def fill_to(directory: Path, free_bytes: int) -> Path:
    """A file taking the filesystem's free space down to `free_bytes`."""
    filler = directory / "filler"
    size = shutil.disk_usage(directory).free - free_bytes
    with filler.open("wb") as fh:
        for _ in range(size >> 20):
            fh.write(b"\0" * (1 << 20))
    return filler


def audited(home: CorralHome, event: str) -> list[dict[str, object]]:
    return [e for e in AuditLog(home.audit_file).read() if e["event"] == event]


async def test_a_filling_disk_stops_the_recording_never_the_session(small_home: CorralHome) -> None:
    home = small_home
    gateway = running_gateway(home, recording=True)
    async with gateway as _, connect(home, "stdio", agent=AGENT) as mcp:
        started = await call(mcp, "computer_session_start")
        assert not started.is_error, text_of(started)
        rid = started.structured_content["session_id"]  # type: ignore[index]
        live = home.recordings_dir / rid / "video.ivf"
        await wait_until(lambda: live.is_file() and live.stat().st_size > 0)

        fill_to(home.root.parent, MIN_FREE_BYTES // 2)
        for x in (100, 200, 300):  # each may change the screen: the recorder looks
            assert not (await call(mcp, "computer_click", x=x, y=x)).is_error
        await wait_until(lambda: audited(home, "recording_stopped"))
        (stopped,) = audited(home, "recording_stopped")
        assert "MiB free" in str(stopped["details"]), stopped  # type: ignore[index]

        # The session goes on, every action audited.
        clicks = len(audited(home, "computer_action"))
        assert not (await call(mcp, "computer_click", x=400, y=400)).is_error
        assert not (await call(mcp, "computer_screenshot")).is_error
        assert len(audited(home, "computer_action")) > clicks
        assert not (await call(mcp, "computer_session_stop")).is_error

    store = RecordingStore(home.recordings_dir)
    meta = store.meta(rid)
    assert meta.stopped is not None and "MiB free" in meta.stopped, meta
    assert any(e.get("event") == "recording_stopped" for e in store.timeline(rid))
    with av.open(str(store.video(rid))) as video:  # what was recorded plays
        assert sum(1 for _ in video.decode(video=0)) >= 1
