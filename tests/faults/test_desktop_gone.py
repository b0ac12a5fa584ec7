"""The desktop rig's container killed, or its agent hung (SIGSTOP), under a live rig: the
next call answers that the rig ended and why (a hang is seen by the channel's heartbeat,
not at the click's deadline), the dead container is removed, and a new rig works (the
next call starts it, or this one did when the death was found between calls:
tests/faults/told.py)."""

from __future__ import annotations

import anyio
import docker
import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect
from tests.e2e.test_computer_use import image_of, text_of
from tests.e2e.test_desktop_rig import desktops
from tests.e2e.test_desktop_rig import gateway as gateway
from tests.faults.told import told_the_rig_ended

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CAP_S = 60  # well under any approval timeout: a call held for an operator fails here


@pytest.mark.parametrize("fault", ["killed", "hung"])
async def test_a_dead_desktop_rig_ends_at_the_next_call_and_a_new_one_starts(
    gateway: CorralHome, docker_client: docker.DockerClient, fault: str
) -> None:
    async with connect(gateway, "stdio") as mcp:
        first = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
        assert not first.is_error, text_of(first)
        (rig,) = desktops(docker_client)
        if fault == "killed":
            rig.kill()
        else:  # the agent itself: tini would not pass a SIGSTOP on
            stopped = rig.exec_run(["pkill", "-STOP", "-f", "desktop_agent"], user="1000:1000")
            assert stopped.exit_code == 0, stopped.output

        with anyio.fail_after(CAP_S):
            click = await mcp.client.call_tool("computer_use", {"verb": "click", "x": 5, "y": 5})
        why = "no sign of life for 2.5 s" if fault == "hung" else "channel closed"
        if told_the_rig_ended(click, why, "computer_use"):
            assert desktops(docker_client) == []
        again = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
        assert not again.is_error, text_of(again)
        assert image_of(again).size == (1280, 800)
        assert len(desktops(docker_client)) == 1  # the new one; the dead one removed
    # the new rig is the gateway's until its idle timeout: the fixture's gateway removes it
