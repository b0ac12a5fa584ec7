"""An application on the desktop rig stops answering its accessibility calls (Mousepad
SIGSTOPped once its window shows and the screen is unmasked, inside libatspi's grace
for a new application): the screenshot still answers in time, masked whole with the reason (the
password fields cannot be read, so none may be shown), the rig stays up, and once the
application answers again the screen is shown unmasked (rig_images/desktop/desktop_mask.py).

Before, the walk ran with libatspi's default waits (15 s for a new application) on the
agent's main thread: the screenshot overran the gateway's 5 s deadline and the rig
ended; past the grace the walk skipped the silent application and the screen was shown
unmasked."""

from __future__ import annotations

import anyio
import docker
import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect
from tests.e2e.test_computer_use import image_of, text_of
from tests.e2e.test_desktop_rig import desktops
from tests.e2e.test_desktop_rig import gateway as gateway
from tests.helpers import wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CAP_S = 60  # a failure bound: the screenshot's own deadline is the gateway's 5 s
SHOWN = ["xdotool", "search", "--onlyvisible", "--name", "Mousepad"]


async def test_a_desktop_app_that_stops_answering_masks_the_screen_and_keeps_the_rig(
    gateway: CorralHome, docker_client: docker.DockerClient
) -> None:
    async with connect(gateway, "stdio") as mcp:
        first = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
        assert not first.is_error, text_of(first)
        (rig,) = desktops(docker_client)

        def shown() -> bool:  # Mousepad's window maps late now and then (desktop_agent.py)
            found = rig.exec_run(SHOWN, user="1000:1000", environment={"DISPLAY": ":99"})
            return found.exit_code == 0

        async def unmasked() -> bool:
            shot = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
            assert not shot.is_error, text_of(shot)
            return (shot.structured_content or {}).get("masked") is False

        # Stopped only once its window shows and the screen is unmasked: Mousepad is then
        # on the accessibility bus (a window of an application not on it masks the screen).
        await wait_until(shown, limit=CAP_S)
        await wait_until(unmasked, limit=CAP_S)
        stopped = rig.exec_run(["pkill", "-STOP", "-x", "mousepad"], user="1000:1000")
        assert stopped.exit_code == 0, stopped.output

        for _ in range(2):
            with anyio.fail_after(CAP_S):
                shot = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
            text = text_of(shot)
            assert not shot.is_error and "ended" not in text, text
            assert "detection failed" in text and "AT-SPI" in text, text
            assert (shot.structured_content or {}).get("masked") is True, text
            assert image_of(shot).getextrema() == ((0, 0), (0, 0), (0, 0))
        assert [c.id for c in desktops(docker_client)] == [rig.id]

        resumed = rig.exec_run(["pkill", "-CONT", "-x", "mousepad"], user="1000:1000")
        assert resumed.exit_code == 0, resumed.output

        await wait_until(unmasked, limit=CAP_S)
        assert [c.id for c in desktops(docker_client)] == [rig.id]
