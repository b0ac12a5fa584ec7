"""A full disk for CORRAL_HOME while an agent works: nothing runs that cannot be audited,
the answer names the file and the fix (before: JSON-RPC -32603 "Internal server error"),
and the audit and the tools work again as soon as space returns, without a restart.

CORRAL_HOME is a tmpfs of its own (4 MiB), mounted by the test and filled by it: never
the machine's own disk."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from tests.e2e.conftest import connect
from tests.e2e.test_computer_use import text_of
from tests.faults import home_on_tmpfs, write_default_agent

pytestmark = [pytest.mark.anyio]

AGENT = "fulldisk"


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[CorralHome]:
    with home_on_tmpfs(tmp_path / "small", 4) as home:
        write_default_agent(home, AGENT)
        yield home


def fill(directory: Path) -> Path:
    """Write zeros until the filesystem refuses with ENOSPC; the filler's path."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 65536
        while chunk:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    return filler


def created_since(client: docker.DockerClient, since: dt.datetime) -> list[str]:
    """The containers the engine created for AGENT since `since` (its own event log; the
    API's `since` is in whole seconds, so earlier events of that second are dropped here
    by their nanosecond stamp: the warm-up's own container may be one)."""
    # `until` is whole seconds too: the next whole second, so nothing of this one is lost
    until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    events = client.events(
        since=since,
        until=until,
        filters={"type": "container", "event": "create", "label": f"corral.agent={AGENT}"},
        decode=True,
    )
    after_ns = int(since.timestamp() * 1e9)
    with contextlib.closing(events):
        return [e["id"] for e in events if int(e["timeNano"]) >= after_ns]


async def test_a_full_disk_runs_nothing_names_the_fix_and_recovers_by_itself(
    small_home: CorralHome, docker_client: docker.DockerClient
) -> None:
    async with connect(small_home, "stdio", agent=AGENT) as mcp:
        warm_up = await mcp.client.call_tool("execute_program", {"code": "print(1)"})
        assert not warm_up.is_error, text_of(warm_up)
        before = dt.datetime.now(dt.UTC)
        filler = fill(small_home.root.parent)

        refused = await mcp.client.call_tool("execute_program", {"code": "print(2)"})
        text = text_of(refused)
        assert refused.is_error, text
        # What failed first depends on the slack in the tmpfs's last pages: the audit log
        # (nothing is run that cannot be audited), or the script's file (after its start
        # was audited: then its `script_not_run` follows when the log still takes it).
        assert text.startswith("Nothing was done: corral cannot write "), text
        assert str(small_home.root) in text and "No space left on device" in text, text
        assert "Fix: free space on" in text and "without a restart" in text, text
        assert created_since(docker_client, before) == []  # nothing ran

        filler.unlink()
        again = await mcp.client.call_tool("execute_program", {"code": "print(3)"})
        assert not again.is_error, text_of(again)
        assert "3" in text_of(again)

    events = [e["event"] for e in AuditLog(small_home.audit_file).read() if e["agent"] == AGENT]
    # the warm-up's two lines, then the call after space returned; between them the
    # refused call's, if the log took any: a start and why it did not run
    run = ["script_started", "script_executed"]
    assert events[:2] == run and events[-2:] == run, events
    assert events[2:-2] in ([], ["script_started"], ["script_started", "script_not_run"]), events
