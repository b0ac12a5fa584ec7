"""Every session network in use: the engine's address pools are full. A kiosk session with
an allowlist (which needs a network of its own) is refused with a clear "no session
network free" naming the engine and the fix, nothing of it is left (no proxy, no kiosk,
no network), and once networks are free again a session starts without restarting
corral. On a private dockerd whose pool holds two networks (tests/faults/engine.py), so
the engine the other tests share is never filled."""

from __future__ import annotations

from typing import Any

import anyio
import docker
import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import text_of, write_agent
from tests.faults.engine import PrivateEngine, private_engine
from tests.images import DEFAULT_KIOSK_IMAGE, DEFAULT_PROXY_IMAGE, ENV

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT = "fk-nets"
SHOP = "shop.test"  # mapped to loopback by resolve_overrides; nothing is ever opened
POOL = "10.214.0.0/23"  # two /24 networks in all
MAX_FILLERS = 8  # more than the pool holds: the loop ends at the engine's refusal


def fill(client: docker.DockerClient) -> list[Any]:
    """Networks of the test's own until the engine has no address left for another."""
    made = []
    for index in range(MAX_FILLERS):
        try:
            made.append(client.networks.create(f"filler-{index}", driver="bridge"))
        except docker.errors.APIError as exc:
            assert "non-overlapping" in str(exc), exc
            return made
    raise AssertionError(f"the pool {POOL} held {MAX_FILLERS} networks")


def corral_things(client: docker.DockerClient) -> tuple[list[Any], list[str]]:
    containers = client.containers.list(all=True, filters={"label": ["corral.managed=true"]})
    networks = [n.name for n in client.networks.list() if str(n.name).startswith("corral-s-")]
    return list(containers), networks


async def test_no_session_network_free_is_said_and_nothing_is_half_made(tmp_path: Any) -> None:
    with private_engine(POOL) as engine:
        await anyio.to_thread.run_sync(engine.load, [DEFAULT_KIOSK_IMAGE, DEFAULT_PROXY_IMAGE])
        await refused_then_started(tmp_path, engine)


async def refused_then_started(tmp_path: Any, engine: PrivateEngine) -> None:
    home = CorralHome(root=tmp_path / "home", env=ENV)
    home.ensure()
    write_agent(home, AGENT, allowed_domains=[SHOP], confirm_words=[], confirm_urls=[])
    config = (
        f'[container]\ndocker_host = "{engine.url}"\n\n'
        f'[container.kiosk]\nresolve_overrides = {{ "{SHOP}" = "127.0.0.1" }}\n'
    )
    client = docker.DockerClient(base_url=engine.url, version="1.41")
    try:
        async with running_gateway(home, config), connect(home, "stdio", agent=AGENT) as mcp:
            fillers = fill(client)
            assert fillers, f"no network at all fits in {POOL}: the host has routes there"
            refused = await mcp.client.call_tool("computer_session_start", {})
            text = text_of(refused)
            assert refused.is_error and "No session network free" in text, text
            assert engine.url in text and "default-address-pools" in text, text
            assert corral_things(client) == ([], [])  # no proxy, no kiosk, no network

            for network in fillers:
                network.remove()
            started = await mcp.client.call_tool("computer_session_start", {})
            assert not started.is_error, text_of(started)
            shot = await mcp.client.call_tool("computer_screenshot", {})
            assert not shot.is_error, text_of(shot)
            stopped = await mcp.client.call_tool("computer_session_stop", {})
            assert not stopped.is_error, text_of(stopped)
        assert corral_things(client) == ([], [])
    finally:
        client.close()
