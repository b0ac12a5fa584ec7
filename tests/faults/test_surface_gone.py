"""A kiosk's container killed, or its agent hung (SIGSTOP), under a live session: the
next call answers that the session ended and why, never waits for an operator (a target
a dead kiosk cannot read is not a question for one), the dead container is removed, and
a new start works. The kiosk's agent is the container's main process, so a SIGSTOP sent
from the host stops it as a hang would (signals from outside the container's PID
namespace reach its PID 1)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import docker
import pytest

from tests.e2e.conftest import connect
from tests.e2e.test_computer_use import SITE, World, call, kiosks, text_of, write_agent
from tests.e2e.test_computer_use import sites as sites
from tests.e2e.test_computer_use import world as world

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# An answer held for an operator would wait the world's approval timeout (120 s): a cap
# well under it makes a held call fail here instead of passing late.
CAP_S = 60


def audit_events(world: World, agent: str) -> list[dict[str, Any]]:
    lines = world.home.audit_file.read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("agent") == agent]


@pytest.mark.parametrize("fault", ["killed", "hung"])
@pytest.mark.parametrize("rules", [True, False], ids=["with-rules", "no-rules"])
async def test_a_dead_kiosk_ends_its_session_at_the_next_call(
    world: World, docker_client: docker.DockerClient, fault: str, rules: bool
) -> None:
    agent = f"fk-{fault}-{int(rules)}"
    confirm = {"confirm_words": ["delete"]} if rules else {}
    write_agent(world.home, agent, allowed_domains=[SITE], **confirm)
    async with connect(world.home, "stdio", agent=agent) as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        (kiosk,) = kiosks(docker_client, agent)
        kiosk.kill(signal="SIGKILL" if fault == "killed" else "SIGSTOP")

        with anyio.fail_after(CAP_S):
            click = await call(mcp, "computer_click", x=10, y=10)

        text = text_of(click)
        assert click.is_error and "Your session ended: its kiosk failed" in text, text
        assert "start a new one with computer_session_start" in text, text
        events = audit_events(world, agent)
        assert not [e for e in events if e["event"].startswith("approval")], events
        ended = [e for e in events if e["event"] == "computer_session_ended"]
        assert len(ended) == 1 and "its kiosk failed" in ended[0]["details"]["why"], ended
        assert kiosks(docker_client, agent) == []  # the dead one is removed

        again = await call(mcp, "computer_session_start")
        assert not again.is_error, text_of(again)
        shot = await call(mcp, "computer_screenshot")
        assert not shot.is_error, text_of(shot)
        await call(mcp, "computer_session_stop")
    assert kiosks(docker_client, agent) == []
