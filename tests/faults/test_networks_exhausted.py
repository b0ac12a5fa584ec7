"""Every session network in use: the engine's address pools are full. A kiosk session with
an allowlist (which needs a network of its own) is refused with a clear "no session
network free" naming the engine and the fix, nothing of it is left (no proxy, no kiosk,
no network), and once networks are free again a session starts without restarting
corral. With a warm kiosk pool, a pool kiosk (which holds its network already) is still
handed out, the pool's refill fails without leaving anything half made, and it refills
once a network is free. On a private dockerd whose pool holds four networks
(tests/faults/engine.py), one for the module, so the engine the other tests share is never
filled and the images are copied once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from orchestrator.backends.docker.networks import _ensure_egress_network_sync
from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import text_of, write_agent
from tests.faults.engine import PrivateEngine, private_engine
from tests.images import DEFAULT_KIOSK_IMAGE, DEFAULT_PROXY_IMAGE, ENV

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT = "fk-nets"
SECOND = "fk-nets-2"
SAFETY = 120  # the outer bound of a wait on the pool (its refill retries every 5 s)
SHOP = "shop.test"  # mapped to loopback by resolve_overrides; nothing is ever opened
NETWORKS = 4  # the private engine's pool holds four /24 networks in all
MAX_FILLERS = 8  # more than the pool holds: the loop ends at the engine's refusal


def fill(client: docker.DockerClient, pool: str) -> list[Any]:
    """Networks of the test's own until the engine has no address left for another."""
    made = []
    for index in range(MAX_FILLERS):
        try:
            made.append(client.networks.create(f"filler-{index}", driver="bridge"))
        except docker.errors.APIError as exc:
            assert "non-overlapping" in str(exc), exc
            return made
    raise AssertionError(f"the pool {pool} held {MAX_FILLERS} networks")


def corral_things(client: docker.DockerClient) -> tuple[list[Any], list[str]]:
    containers = client.containers.list(
        ignore_removed=True, all=True, filters={"label": ["corral.managed=true"]}
    )
    networks = [n.name for n in client.networks.list() if str(n.name).startswith("corral-s-")]
    return list(containers), networks


@pytest.fixture(scope="module")
def engine() -> Iterator[PrivateEngine]:
    with private_engine(NETWORKS) as started:
        started.load([DEFAULT_KIOSK_IMAGE, DEFAULT_PROXY_IMAGE])
        yield started


async def test_no_session_network_free_is_said_and_nothing_is_half_made(
    tmp_path: Any, engine: PrivateEngine
) -> None:
    await refused_then_started(tmp_path, engine)


def gateway_config(engine: PrivateEngine, warm: int = 0) -> str:
    return (
        f'[container]\ndocker_host = "{engine.url}"\n\n'
        f'[container.kiosk]\nresolve_overrides = {{ "{SHOP}" = "127.0.0.1" }}\nwarm = {warm}\n'
    )


def home_with_agents(tmp_path: Any, *agents: str) -> CorralHome:
    home = CorralHome(root=tmp_path / "home", env=ENV)
    home.ensure()
    for agent in agents:
        write_agent(home, agent, allowed_domains=[SHOP], confirm_words=[], confirm_urls=[])
    return home


async def refused_then_started(tmp_path: Any, engine: PrivateEngine) -> None:
    home = home_with_agents(tmp_path, AGENT)
    config = gateway_config(engine)
    client = docker.DockerClient(base_url=engine.url, version="1.41")
    try:
        async with running_gateway(home, config), connect(home, "stdio", agent=AGENT) as mcp:
            fillers = fill(client, engine.pool)
            assert fillers, f"no network at all fits in {engine.pool}: the host has routes there"
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


def pool_joins(home: CorralHome) -> int:
    """How many kiosks have joined the warm pool (audited as each joins)."""
    lines = home.audit_file.read_text().splitlines() if home.audit_file.exists() else []
    return sum(json.loads(line)["event"] == "kiosk_pool_ready" for line in lines if line)


def kiosks(client: docker.DockerClient) -> list[Any]:
    return client.containers.list(
        ignore_removed=True, all=True, filters={"label": ["corral.kind=kiosk"]}
    )


async def test_a_warm_pool_in_full_address_pools_hands_out_what_it_holds(
    tmp_path: Any, engine: PrivateEngine
) -> None:
    """warm = 1: of the four networks, the egress network (every proxy's way out, made
    once per engine) holds one, the pool's kiosk one, and the test fills the rest. A
    session claims the pool's kiosk and works; the pool's refill finds no network and
    makes nothing; a second agent's session is refused clearly and leaves nothing; once a
    network is free the pool refills by itself, and the second session gets that kiosk."""
    home = home_with_agents(tmp_path, AGENT, SECOND)
    client = docker.DockerClient(base_url=engine.url, version="1.41")
    try:
        _ensure_egress_network_sync(client)  # as any earlier session would have left it
        async with running_gateway(home, gateway_config(engine, warm=1)):
            await wait_until(lambda: pool_joins(home) == 1, limit=SAFETY)
            fillers = fill(client, engine.pool)
            assert fillers, f"the pool kiosk took one network of {engine.pool}, none was left"
            async with connect(home, "stdio", agent=AGENT) as first:
                started = await first.client.call_tool("computer_session_start", {})
                assert not started.is_error, text_of(started)
                (claimed,) = kiosks(client)
                assert claimed.labels["corral.agent"] == "warm-pool"  # made by the pool
                async with connect(home, "stdio", agent=SECOND) as second:
                    refused = await second.client.call_tool("computer_session_start", {})
                    text = text_of(refused)
                    assert refused.is_error and "No session network free" in text, text
                    assert [k.id for k in kiosks(client)] == [claimed.id]  # nothing half made
                    for network in fillers:
                        network.remove()
                    await wait_until(lambda: pool_joins(home) == 2, limit=SAFETY)
                    again = await second.client.call_tool("computer_session_start", {})
                    assert not again.is_error, text_of(again)
                    shot = await second.client.call_tool("computer_screenshot", {})
                    assert not shot.is_error, text_of(shot)
                    assert len(kiosks(client)) == 2
        assert corral_things(client) == ([], [])
    finally:
        client.close()
