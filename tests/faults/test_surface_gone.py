"""A kiosk's container killed, or its agent hung (SIGSTOP), under a live session: the
next call answers that the session ended and why, never waits for an operator (a target
a dead kiosk cannot read is not a question for one), the dead container is removed, and
a new start works. A hang is seen by the channel's heartbeat within seconds, whatever the
deadline of the request in flight; a kiosk the kernel killed for memory is answered like a
killed one, and the reason names the OOM kill. The hang is a SIGSTOP of the agent's own
process (the container's init would not pass one on)."""

from __future__ import annotations

from typing import Any

import anyio
import docker
import pytest

from orchestrator.audit import AuditLog
from tests.e2e.conftest import connect
from tests.e2e.test_computer_use import (
    SITE,
    World,
    call,
    image_of,
    kiosks,
    text_of,
    write_agent,
)
from tests.e2e.test_computer_use import sites as sites
from tests.e2e.test_computer_use import world as world

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# An answer held for an operator would wait the world's approval timeout (120 s): a cap
# well under it makes a held call fail here instead of passing late.
CAP_S = 60


def audit_events(world: World, agent: str) -> list[dict[str, Any]]:
    return [e for e in AuditLog(world.home.audit_file).read() if e.get("agent") == agent]


# The agent made the OOM killer's first choice (a process may raise its own score), then
# memory taken inside the kiosk until its limit: the kernel kills the agent, as it would
# the biggest process of a kiosk short of memory.
OOM = (
    "echo 1000 > /proc/$(pgrep -o -f '^python3 /opt/corral/kiosk_agent')/oom_score_adj"
    " && exec python3 -c 'b = []\nwhile True: b.append(bytearray(64 << 20))'"
)
WHY = {
    "killed": ["channel closed", "exited with code 137"],
    "oom": ["channel closed", "killed it for lack of memory (OOM)"],
}


@pytest.mark.parametrize("fault", ["killed", "hung", "oom"])
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
        if fault == "killed":
            kiosk.kill()
        elif fault == "oom":
            kiosk.exec_run(["sh", "-c", OOM], user="1000:1000")  # ends as the kiosk does
        else:  # the agent itself, not the container's init (which would not pass it on)
            stopped = kiosk.exec_run(["pkill", "-STOP", "-f", "kiosk_agent"], user="1000:1000")
            assert stopped.exit_code == 0, stopped.output

        with anyio.fail_after(CAP_S):
            click = await call(mcp, "computer_click", x=10, y=10)

        text = text_of(click)
        assert click.is_error and "Your session ended: its kiosk failed" in text, text
        assert "start a new one with computer_session_start" in text, text
        # A hung agent is seen by the channel's heartbeat (2.5 s of silence), not at the
        # click's 10 s deadline; with rules the 3 s target read may miss its deadline
        # first on a loaded machine. A killed one is seen by its stream's end.
        if fault == "hung":
            whys = ["no sign of life for 2.5 s"] + (["no answer to target within"] * rules)
            assert any(why in text for why in whys), text
        else:  # how the container ended, as the engine says
            assert all(why in text for why in WHY[fault]), text
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


async def test_a_frozen_page_gets_a_black_screenshot_in_time_and_keeps_its_session(
    world: World,
) -> None:
    """The page's own script blocks its main thread 4 s at a time, so nothing the probe
    asks the page is answered: each probe stops at its budget, the image is masked whole
    with the reason, and the answer comes inside the gateway's deadline, which a missed
    one would turn into the end of the session. Twice: the session is still there."""
    write_agent(world.home, "fk-frozen", allowed_domains=[SITE])
    async with connect(world.home, "stdio", agent="fk-frozen") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        await call(mcp, "computer_navigate", url=f"https://{SITE}/busy")
        for _ in range(2):
            with anyio.fail_after(CAP_S):
                shot = await call(mcp, "computer_screenshot")
            text = text_of(shot)
            assert "session ended" not in text, text
            assert not shot.is_error and "detection failed" in text, text
            assert image_of(shot).getextrema() == ((0, 0), (0, 0), (0, 0))
        await call(mcp, "computer_session_stop")
