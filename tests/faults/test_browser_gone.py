"""A browser rig's container killed under a live rig: the next call answers that the rig
ended and why, the dead container is removed, and a new rig works (the next call starts
it, or this one did when the death was found between calls: tests/faults/told.py). The
kiosk's cases are in test_surface_gone.py, the desktop rig's in test_desktop_gone.py; all
of them end in the pipeline's one `alive` stage."""

from __future__ import annotations

import anyio
import docker
import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect
from tests.e2e.test_browser_use import GATEWAY_PIDS, SITE, rigs_of, use
from tests.e2e.test_browser_use import gateway as gateway
from tests.e2e.test_browser_use import rig_sites as rig_sites
from tests.e2e.test_computer_use import text_of
from tests.faults.told import told_the_rig_ended

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CAP_S = 60  # well under any approval timeout: a call held for an operator fails here


# How each fault is made: the container killed, or a process in it stopped (SIGSTOP): the
# relay of the CDP pipe (the rig's main process), or every Chromium process.
HANG = {"relay-hung": "cdp_pipe", "browser-hung": "/usr/lib/chromium/chromium"}


@pytest.mark.parametrize("fault", ["killed", *HANG])
async def test_a_dead_browser_rig_ends_at_the_next_call_and_a_new_one_starts(
    gateway: CorralHome, docker_client: docker.DockerClient, fault: str
) -> None:
    async with connect(gateway, "stdio") as mcp:
        opened = await use(mcp, "navigate", url=f"https://{SITE}/")
        assert not opened.is_error, text_of(opened)
        (rig,) = rigs_of(docker_client, "alice")
        if fault == "killed":
            rig.kill()
        else:  # tini, the container's init, would not pass a SIGSTOP on
            stopped = rig.exec_run(["pkill", "-STOP", "-f", HANG[fault]])
            assert stopped.exit_code == 0, stopped.output

        with anyio.fail_after(CAP_S):
            shot = await use(mcp, "screenshot")
        why = "no sign of life for 2.5 s" if fault != "killed" else "CDP pipe closed"
        if told_the_rig_ended(shot, why, "browser_use"):
            assert rigs_of(docker_client, "alice") == []
            again = await use(mcp, "navigate", url=f"https://{SITE}/")
            assert not again.is_error, text_of(again)
        assert len(rigs_of(docker_client, "alice")) == 1  # the new one; the dead one removed
    # the new rig is the gateway's until its idle timeout: the fixture's gateway removes it


async def test_a_browser_rig_whose_proxy_was_killed_fails_closed_and_ends_saying_why(
    gateway: CorralHome, docker_client: docker.DockerClient
) -> None:
    async with connect(gateway, "stdio") as mcp:
        opened = await use(mcp, "navigate", url=f"https://{SITE}/")
        assert not opened.is_error, text_of(opened)
        ours = {str(pid) for pid in GATEWAY_PIDS.values()}  # another test may run an alice
        (proxy,) = [
            c
            for c in docker_client.containers.list(
                ignore_removed=True, filters={"label": ["corral.kind=proxy", "corral.agent=alice"]}
            )
            if c.labels.get("corral.owner.pid") in ours
        ]
        proxy.kill()

        failed = await use(mcp, "navigate", url=f"https://{SITE}/")
        text = text_of(failed)
        assert failed.is_error and "its egress proxy is gone" in text, text
        assert "ended: its egress proxy failed" in text, text
        assert rigs_of(docker_client, "alice") == []
        again = await use(mcp, "navigate", url=f"https://{SITE}/")
        assert not again.is_error, text_of(again)
