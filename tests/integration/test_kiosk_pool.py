"""The kiosk warm pool (issue 14, orchestrator/pools/kiosks.py) on the real engine: a claim
never shows what the pool kiosk showed; it gets the session's egress (its proxy on the
kiosk's network, or no network at all) and size; a dead pool kiosk or one of an old image
is replaced, never handed out. (The owner SIGKILLed with a full pool: tests/e2e.)

Every address here is a container this module started (the HTTPS site) or this host's.
"""

from __future__ import annotations

import base64
import io
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from PIL import Image

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.networks import _ensure_egress_network_sync
from orchestrator.config import ComputerUseConfig, ContainerConfig, CorralConfig, KioskConfig
from orchestrator.gateway.service import egress_factory
from orchestrator.home import CorralHome
from orchestrator.pools.kiosks import KioskPool, KioskPoolSettings, open_kiosk_pool
from orchestrator.runtime import Runtime, open_runtime
from orchestrator.surfaces.kiosk.sessions import SessionManager
from sandboxes.isolation import POOL_CPU_SHARES, SESSION_CPU_SHARES
from sandboxes.params import SessionStartParams
from tests.images import DEFAULT_PROXY_IMAGE
from tests.integration.conftest import control_labels, wait_until
from tests.sites import make_certs, start_site

pytestmark = pytest.mark.anyio

KIOSK_IMAGE = "corral-kiosk:latest"
SITE = "pool.corral.test"
RED_PAGE = "document.documentElement.style.background = 'rgb(255,0,0)'; document.title = 'x'"


@pytest.fixture(scope="module")
def site(docker_client: docker.DockerClient) -> Iterator[tuple[str, str]]:
    """(CA file, address) of an HTTPS site on corral-egress answering 'pool-site'."""
    _ensure_egress_network_sync(docker_client)
    certs = Path(tempfile.mkdtemp(prefix="corral-pool-certs-"))
    started: list[Any] = []
    try:
        ca_pem = make_certs(certs, (SITE,))
        routes = {"*": (200, {"Content-Type": "text/html"}, "<title>pool-site</title>hi")}
        address = start_site(docker_client, certs, routes, 443, [], started)
        (certs / "ca.pem").write_text(ca_pem)
        yield str(certs / "ca.pem"), address
    finally:
        for container in started:
            container.stop()
        shutil.rmtree(certs, ignore_errors=True)


def _config(site: tuple[str, str]) -> CorralConfig:
    ca_file, address = site
    kiosk = KioskConfig(extra_ca_file=ca_file, resolve_overrides={SITE: address}, warm=1)
    return CorralConfig(container=ContainerConfig(kiosk=kiosk))


@pytest.fixture
async def runtime(corral_home: CorralHome) -> AsyncIterator[Runtime]:
    async with open_runtime(corral_home) as rt:
        yield rt
    left = await rt.backend.list_managed({"corral.instance": rt.owner.instance_id})
    assert not left, f"containers left behind: {[c.name for c in left]}"


async def _full(pool: KioskPool) -> None:
    await wait_until(lambda: len(pool.idle()) == pool.settings.size, limit=90)


def _red_pixels(png: bytes) -> int:
    r, g, b = Image.open(io.BytesIO(png)).convert("RGB").split()
    red = Image.eval(r, lambda v: 255 if v > 200 else 0)
    dark_g = Image.eval(g, lambda v: 255 if v < 60 else 0)
    dark_b = Image.eval(b, lambda v: 255 if v < 60 else 0)
    from PIL import ImageChops

    both = ImageChops.multiply(ImageChops.multiply(red, dark_g), dark_b)
    return int(both.histogram()[255])


async def _shot(channel: Any) -> bytes:
    answer = await channel.request("screenshot", 10)
    return base64.b64decode(answer["png"])


def _manager(
    home: CorralHome, config: CorralConfig, rt: Runtime, pool: KioskPool
) -> SessionManager:
    backend = rt.backend
    assert isinstance(backend, DockerBackend)
    manager = SessionManager(home, config, backend, rt.audit, egress_factory(backend, config))
    manager.kiosk_pool = pool
    return manager


def _cpu_shares(client: docker.DockerClient, container_id: str) -> int:
    return int(client.api.inspect_container(container_id)["HostConfig"]["CpuShares"])


def _interfaces(client: docker.DockerClient, container_id: str) -> list[str]:
    out = client.containers.get(container_id).exec_run(["ls", "/sys/class/net"]).output
    return sorted(out.decode().split())


async def test_a_claimed_kiosk_shows_nothing_from_before_and_has_no_network_without_allowlist(
    corral_home: CorralHome,
    runtime: Runtime,
    site: tuple[str, str],
    docker_client: docker.DockerClient,
) -> None:
    config = _config(site)
    settings = KioskPoolSettings(image=KIOSK_IMAGE, size=1)
    async with open_kiosk_pool(runtime.backend, settings) as pool:  # type: ignore[arg-type]
        await _full(pool)
        waiting = pool.idle()[0]
        # The attack: something shown, and a history entry made, in the pool kiosk.
        await waiting.body.channel.request(
            "eval", 10, expression=RED_PAGE + "; history.pushState({}, '', '#x')"
        )

        async def shows_red() -> bool:
            return _red_pixels(await _shot(waiting.body.channel)) > 500_000

        await wait_until(shows_red, limit=10)  # control: the planted page does show
        # Waiting in the pool, it has the pool's CPU weight; claimed, a session's.
        assert _cpu_shares(docker_client, waiting.id) == POOL_CPU_SHARES
        manager = _manager(corral_home, config, runtime, pool)
        await manager.start("pool-agent", SessionStartParams(), ComputerUseConfig())
        session = manager.sessions["pool-agent"]
        try:
            assert session.channel is waiting.body.channel  # the pool's kiosk, claimed
            assert _cpu_shares(docker_client, session.channel.id) == SESSION_CPU_SHARES
            assert _red_pixels(await _shot(session.channel)) == 0
            page = await session.channel.request("page", 10)
            assert (page["url"], page["title"]) == ("about:blank", "about:blank") or (
                page["url"] == "about:blank" and page["title"] in ("", "about:blank")
            )
            history = await session.channel.request("eval", 10, expression="history.length")
            assert history["value"] == 1
            # No allowlist: the kiosk left its pool network (now removed): only loopback.
            assert _interfaces(docker_client, session.channel.id) == ["lo"]
            await wait_until(lambda: not docker_client.networks.list(names=[waiting.network.name]))
        finally:
            await manager.close_all()
        started = [e for e in runtime.audit.read() if e["event"] == "computer_session_started"]
        assert started[-1]["details"]["warm"] is True


async def test_a_claim_with_an_allowlist_reaches_the_site_through_the_session_proxy(
    corral_home: CorralHome, runtime: Runtime, site: tuple[str, str]
) -> None:
    config = _config(site)
    ca_pem = Path(site[0]).read_text()
    settings = KioskPoolSettings(KIOSK_IMAGE, 1, ca_pem, proxy_image=DEFAULT_PROXY_IMAGE)
    async with open_kiosk_pool(runtime.backend, settings) as pool:  # type: ignore[arg-type]
        await _full(pool)
        waiting = pool.idle()[0]
        armed = waiting.network._proxy  # type: ignore[attr-defined]
        assert armed is not None
        proxy_before = armed.id
        # The attack: an idle pool kiosk asks its (armed) proxy for the site: refused, it
        # has no pins yet; nor does it reach the site around the proxy.
        tried = await waiting.body.channel.request("navigate", 30, url=f"https://{SITE}/")
        assert tried["error_text"] is not None and tried["title"] != "pool-site"
        manager = _manager(corral_home, config, runtime, pool)
        cfg = ComputerUseConfig(allowed_domains=[SITE])
        await manager.start("pool-agent", SessionStartParams(width=1024, height=768), cfg)
        session = manager.sessions["pool-agent"]
        try:
            assert session.pinned == (SITE,)
            assert (session.width, session.height) == (1024, 768)
            shot = Image.open(io.BytesIO(await _shot(session.channel)))
            assert shot.size == (1024, 768)  # another size: the display started afresh
            opened = await session.channel.request("navigate", 30, url=f"https://{SITE}/")
            assert opened["error_text"] is None and opened["title"] == "pool-site"
            # The proxy made ahead with the kiosk's network is the one that was pinned.
            assert session.egress is not None
            assert session.egress.proxy_container_id == proxy_before
        finally:
            await manager.close_all()


async def test_a_dead_pool_kiosk_is_removed_and_never_handed_out(
    runtime: Runtime, docker_client: docker.DockerClient
) -> None:
    settings = KioskPoolSettings(image=KIOSK_IMAGE, size=1)
    async with open_kiosk_pool(runtime.backend, settings) as pool:  # type: ignore[arg-type]
        await _full(pool)
        dead = pool.idle()[0]
        docker_client.containers.get(dead.id).kill()
        claimed = await pool.claim()
        assert claimed is None or claimed.id != dead.id
        if claimed is not None:
            await claimed.discard()

        def gone() -> bool:
            try:
                docker_client.containers.get(dead.id)
            except docker.errors.NotFound:
                return not docker_client.networks.list(names=[dead.network.name])
            return False

        await wait_until(gone, limit=30)
        await _full(pool)  # and it was replaced


async def test_a_pool_kiosk_of_an_old_image_is_removed_and_the_pool_refilled(
    runtime: Runtime, docker_client: docker.DockerClient
) -> None:
    tag = "corral-test-kiosk-pool:latest"
    docker_client.images.get(KIOSK_IMAGE).tag(tag)
    try:
        settings = KioskPoolSettings(image=tag, size=1)
        async with open_kiosk_pool(runtime.backend, settings) as pool:  # type: ignore[arg-type]
            await _full(pool)
            old = pool.idle()[0]
            # `corral images build` replaced the image: the tag now names another id.
            docker_client.images.build(
                fileobj=io.BytesIO(f"FROM {KIOSK_IMAGE}\nLABEL corral.test.pool=1\n".encode()),
                tag=tag,
                rm=True,
                pull=False,
                labels=control_labels("test-image"),
            )
            assert await pool.claim() is None
            await wait_until(lambda: len(pool.idle()) == 1 and pool.idle()[0] is not old, 90)
            assert pool.idle()[0].image_id != old.image_id
    finally:
        docker_client.images.remove(tag, force=True)
