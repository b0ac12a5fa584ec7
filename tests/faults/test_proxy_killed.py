"""The egress proxy of a live kiosk session killed: navigation fails closed (judged by the
site's own log: nothing reaches it after the kill, so nothing went around the proxy), the
answer says the proxy is gone and that the session ended, its kiosk is removed, and a new
session (with a new proxy) works."""

from __future__ import annotations

from typing import Any

import docker
import pytest

from tests.e2e.conftest import connect
from tests.e2e.test_computer_use import SITE, World, call, kiosks, text_of, write_agent
from tests.e2e.test_computer_use import sites as sites
from tests.e2e.test_computer_use import world as world
from tests.sites import requests_seen

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def proxies(client: docker.DockerClient, agent: str) -> list[Any]:
    return client.containers.list(
        ignore_removed=True, filters={"label": ["corral.kind=proxy", f"corral.agent={agent}"]}
    )


async def test_a_killed_proxy_fails_closed_and_ends_the_session_saying_why(
    world: World, docker_client: docker.DockerClient, sites: tuple[str, str, str]
) -> None:
    agent, site_ip = "fk-proxy", sites[1]
    write_agent(world.home, agent, allowed_domains=[SITE])
    async with connect(world.home, "stdio", agent=agent) as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        opened = await call(mcp, "computer_navigate", url=f"https://{SITE}/?before-kill")
        assert not opened.is_error, text_of(opened)
        (proxy,) = proxies(docker_client, agent)
        proxy.kill()

        failed = await call(mcp, "computer_navigate", url=f"https://{SITE}/?after-kill")
        text = text_of(failed)
        assert failed.is_error, text
        assert f"Navigation to {SITE} failed, and nothing left the kiosk" in text, text
        assert "its egress proxy is gone" in text, text
        assert "Your session ended: its egress proxy failed" in text, text
        assert kiosks(docker_client, agent) == []
        seen = requests_seen(docker_client, site_ip)
        assert "/?before-kill" in seen and "/?after-kill" not in seen, seen

        assert not (await call(mcp, "computer_session_start")).is_error
        again = await call(mcp, "computer_navigate", url=f"https://{SITE}/?new-proxy")
        assert not again.is_error, text_of(again)
        await call(mcp, "computer_session_stop")
    assert kiosks(docker_client, agent) == []
