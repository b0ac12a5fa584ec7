"""The browser and desktop rigs' warm pools (issue 23, orchestrator/pools/warm.py) on the
real engine: a rig taken from a pool is the pool's started container, given its egress at
the claim (the armed proxy made with its network pinned to the allowlist, or no network
at all); an idle member reaches nothing; a dead one is never handed out. (The owner
SIGKILLed with full pools, and the pools by default: tests/e2e/test_warm_pools.py.)

Every address here is a container this module started (the HTTPS site) or this host's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import docker
import docker.errors
import pytest

from orchestrator.config import load_config, render_new_agent
from orchestrator.gateway.service import egress_factory
from orchestrator.home import CorralHome
from orchestrator.pools.warm import WarmPool, WarmSettings, open_warm_pool
from orchestrator.runtime import open_runtime
from orchestrator.surfaces.rigs import RigManager
from tests.helpers import gone, wait_until, write_config
from tests.images import DEFAULT_BROWSER_IMAGE, DEFAULT_DESKTOP_IMAGE, DEFAULT_PROXY_IMAGE
from tests.sites import one_page_site

pytestmark = pytest.mark.anyio

SITE = "rigpool.corral.test"


@pytest.fixture(scope="module")
def site(docker_client: docker.DockerClient) -> Iterator[tuple[str, str]]:
    """(CA file, address) of an HTTPS site on corral-egress titled 'rig-pool-site'."""
    html = "<title>rig-pool-site</title>hi"
    with one_page_site(docker_client, SITE, html, "corral-rigpool-certs-") as (ca, ip, _):
        yield ca, ip


def write_agent(home: CorralHome, allowed: list[str]) -> None:
    text = render_new_agent("ann")
    for family in ("browser_use", "desktop_use"):
        text = text.replace(f"{family} = false", f"{family} = true")
    listed = ", ".join(f'"{host}"' for host in allowed)
    text = text.replace("allowed_domains = []", f"allowed_domains = [{listed}]")
    path = home.agent_file("ann")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
async def rigs(corral_home: CorralHome, site: tuple[str, str]) -> AsyncIterator[RigManager]:
    """A rig manager with real egress and a browser and a desktop pool of one each."""
    ca_file, address = site
    write_config(
        corral_home,
        f'[container.kiosk]\nextra_ca_file = "{ca_file}"\n'
        f'[container.kiosk.resolve_overrides]\n"{SITE}" = "{address}"\n',
    )
    config = load_config(corral_home.config_file)
    async with open_runtime(corral_home) as rt:
        manager = RigManager(
            corral_home, config, rt.backend, rt.audit, egress_factory(rt.backend, config)
        )
        try:
            async with contextlib.AsyncExitStack() as pools:  # closed before the rigs
                for surface, image in (
                    ("browser", DEFAULT_BROWSER_IMAGE),
                    ("desktop", DEFAULT_DESKTOP_IMAGE),
                ):
                    settings = WarmSettings(surface, image, 1, DEFAULT_PROXY_IMAGE, "r")
                    pool = open_warm_pool(rt.backend, settings, manager.starts.start_on(surface))
                    manager.starts.pools[surface] = await pools.enter_async_context(pool)
                yield manager
        finally:
            await manager.close_all()
        left = await rt.backend.list_managed({"corral.instance": rt.owner.instance_id})
    assert not left, f"containers left behind: {[c.name for c in left]}"


async def full(pool: WarmPool[Any]) -> None:
    await wait_until(lambda: len(pool.idle()) == pool.size, limit=120)


def interfaces(client: docker.DockerClient, container_id: str) -> list[str]:
    out = client.containers.get(container_id).exec_run(["ls", "/sys/class/net"]).output
    return sorted(out.decode().split())


async def test_a_pool_browser_reaches_nothing_idle_and_its_allowlist_once_claimed(
    corral_home: CorralHome, rigs: RigManager, docker_client: docker.DockerClient
) -> None:
    write_agent(corral_home, [SITE])
    pool = rigs.starts.pools["browser"]
    await full(pool)
    waiting = pool.idle()[0]
    armed = waiting.network._proxy  # type: ignore[attr-defined]
    assert armed is not None
    member_id, proxy_id = waiting.id, armed.id  # (a removed container's object forgets it)
    # The attack: the idle pool browser asks for the site: its proxy has no pins yet.
    page = waiting.body.context.pages[-1]
    with pytest.raises(Exception, match="ERR_"):
        await page.goto(f"https://{SITE}/", timeout=20_000)

    opened = await rigs.handle(
        "ann", "browser_use", {"verb": "navigate", "url": f"https://{SITE}/"}
    )

    assert not opened.is_error, opened.text
    assert "rig-pool-site" in opened.text
    rig = rigs.rigs[("ann", "browser", "")]
    assert rig.id == waiting.session_id and rig.id.startswith("r")  # the pool's, claimed
    assert rig.container.id == member_id
    assert rig.egress is not None and rig.egress.proxy_container_id == proxy_id
    assert rig.pinned == (SITE,)
    started = [e for e in rigs.audit.read() if e["event"] == "rig_started"]
    assert started[-1]["details"]["warm"] is True
    await full(pool)  # refilled behind the claim
    assert pool.idle()[0] is not waiting
    closed = await rigs.handle("ann", "rig_close", {})
    assert not closed.is_error
    await wait_until(lambda: gone(docker_client, member_id) and gone(docker_client, proxy_id))
    assert not docker_client.networks.list(names=[waiting.network.name])


async def test_a_pool_desktop_claimed_without_an_allowlist_keeps_only_loopback(
    corral_home: CorralHome, rigs: RigManager, docker_client: docker.DockerClient
) -> None:
    write_agent(corral_home, [])
    pool = rigs.starts.pools["desktop"]
    await full(pool)
    waiting = pool.idle()[0]
    armed = waiting.network._proxy  # type: ignore[attr-defined]
    assert armed is not None
    member_id, proxy_id = waiting.id, armed.id

    shot = await rigs.handle("ann", "computer_use", {"verb": "screenshot"})

    assert not shot.is_error, shot.text
    rig = rigs.rigs[("ann", "desktop", "")]
    assert rig.id == waiting.session_id and rig.channel.id == member_id
    assert rig.pinned == () and rig.egress is not None and rig.egress.network_name is None
    assert interfaces(docker_client, member_id) == ["lo"]
    # Its network, and the unpinned proxy made with it, are removed in the background.
    await wait_until(lambda: gone(docker_client, proxy_id), limit=30)
    await wait_until(lambda: not docker_client.networks.list(names=[waiting.network.name]), 30)


async def test_a_dead_pool_rig_is_removed_and_never_handed_out(
    corral_home: CorralHome, rigs: RigManager, docker_client: docker.DockerClient
) -> None:
    write_agent(corral_home, [])
    pool = rigs.starts.pools["browser"]
    await full(pool)
    dead = pool.idle()[0]
    dead_id = dead.id
    docker_client.containers.get(dead_id).kill()

    tabs = await rigs.handle("ann", "browser_use", {"verb": "tabs"})

    assert not tabs.is_error, tabs.text
    rig = rigs.rigs[("ann", "browser", "")]
    assert rig.container.id != dead_id  # started cold instead
    started = [e for e in rigs.audit.read() if e["event"] == "rig_started"]
    assert started[-1]["details"]["warm"] is False
    await wait_until(lambda: gone(docker_client, dead_id), limit=30)
    await wait_until(lambda: not docker_client.networks.list(names=[dead.network.name]), 30)
