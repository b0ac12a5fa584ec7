"""The egress proxy of a live desktop rig killed. The desktop's apps load their pages
themselves, so no navigation of corral's finds the proxy gone; the gateway asks each rig's
proxy about once a second (with its idle and lifetime checks). A dead proxy ends the rig
(`rig_ended`, why: its egress proxy failed), its containers are removed, and the agent's
next call is answered by a new rig with a new proxy, its answer saying first that the old
rig ended and why. Until it ends, the rig has no route out at all: its only network is the
session network, whose one way out is the proxy (tests/integration/test_egress.py)."""

from __future__ import annotations

import json
from typing import Any

import docker
import pytest

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.e2e.conftest import AGENT, connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import SITE, kiosk_config, text_of
from tests.e2e.test_computer_use import sites as sites
from tests.e2e.test_desktop_rig import GATEWAY_PIDS, desktops

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SAFETY = 60  # the outer bound of a wait; the proxy is asked about once a second


def proxies(client: docker.DockerClient) -> list[Any]:
    found = client.containers.list(
        all=True,
        ignore_removed=True,
        filters={"label": ["corral.kind=proxy", f"corral.agent={AGENT}"]},
    )
    return [c for c in found if c.labels.get("corral.owner.pid") in GATEWAY_PIDS]


def rig_ends(home: CorralHome) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in home.audit_file.read_text().splitlines() if line]
    return [e["details"] for e in lines if e["event"] == "rig_ended"]


async def test_a_desktop_rigs_killed_proxy_ends_the_rig_and_the_next_call_says_so(
    corral_home: CorralHome, sites: tuple[str, str, str], docker_client: docker.DockerClient
) -> None:
    path = corral_home.agent_file(AGENT)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render_new_agent(AGENT).replace("desktop_use = false", "desktop_use = true")
    path.write_text(text.replace("allowed_domains = []", f'allowed_domains = ["{SITE}"]'))
    async with (
        running_gateway(corral_home, kiosk_config(sites)) as (_, pid),
        connect(corral_home, "stdio") as mcp,
    ):
        GATEWAY_PIDS.add(str(pid))
        first = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
        assert not first.is_error, text_of(first)
        listed = (await mcp.client.call_tool("rig_list", {})).structured_content or {}
        (rig_id,) = [row["rig_id"] for row in listed["rigs"]]
        (proxy,) = proxies(docker_client)
        proxy.kill()

        await wait_until(lambda: rig_ends(corral_home), limit=SAFETY)
        (ended,) = rig_ends(corral_home)
        assert ended["rig"] == rig_id and "its egress proxy failed" in ended["why"], ended
        await wait_until(lambda: desktops(docker_client) == [], limit=SAFETY)
        await wait_until(lambda: proxies(docker_client) == [], limit=SAFETY)

        again = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
        said = text_of(again)
        assert not again.is_error, said
        assert said.startswith(f"Your desktop rig {rig_id} ended: its egress proxy failed"), said
        assert "this call started a new one" in said, said
        (new_proxy,) = proxies(docker_client)
        assert new_proxy.id != proxy.id and new_proxy.status == "running"
