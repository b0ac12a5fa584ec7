"""SPEC S2.6 / docs/kiosk-internals.md section 3: network-enforced egress, on the real engine.

Every address targeted here is this host's own (docker0, a session gateway) or a
container this test started (the HTTPS sites, the proxy). Names such as
`site.corral.test` are never looked up by this host: the tests map them through the
resolve override, and every probe container gets `dns=[<this host's own address>]`
so that even an unexpected lookup could only reach this host.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import docker
import docker.errors
import pytest

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.egress import SessionEgress
from orchestrator.backends.docker.firewall import (
    add_input_drop,
    input_drop_bridges,
    remove_input_drop,
)
from orchestrator.backends.docker.network_reaper import reap_networks
from orchestrator.backends.docker.networks import (
    EGRESS_NETWORK,
    KIND_SESSION_NETWORK,
    PROXY_URL,
    _ensure_egress_network_sync,
    new_session_id,
)
from orchestrator.backends.owner import LABEL_KIND, Owner, read_boot_id
from orchestrator.errors import SandboxUnavailable, UnavailableCode
from tests.images import DEFAULT_PROXY_IMAGE, DEFAULT_SANDBOX_IMAGE
from tests.integration.conftest import bridge_gateway, control_labels, wait_until
from tests.sites import make_certs, start_site

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
SANDBOX_IMAGE = DEFAULT_SANDBOX_IMAGE
PROXY_IMAGE = DEFAULT_PROXY_IMAGE
SITE = "site.corral.test"  # listed, HTTPS on 443
ALT = "alt.corral.test"  # listed, but its server listens on 8443 only
OTHER = "other.corral.test"  # not listed; on corral-egress it also answers to SITE's name
MARKER = "payload-marker-" + secrets.token_hex(4)


# ---------------------------------------------------------------- fixtures


@dataclass(frozen=True)
class Site:
    name: str
    ip: str
    port: int
    body: str


@dataclass(frozen=True)
class Sites:
    site: Site
    alt: Site
    other: Site
    ca_pem: str


def _make_certs(directory: Path) -> str:
    return make_certs(directory, (SITE, ALT, OTHER))


def _start_site(
    client: docker.DockerClient,
    certs: Path,
    body: str,
    port: int,
    aliases: Sequence[str],
    started: list[Any],
) -> str:
    return start_site(client, certs, {"*": (200, {}, body)}, port, aliases, started)


@pytest.fixture(scope="module")
def sites(docker_client: docker.DockerClient) -> Iterator[Sites]:
    for image in (SANDBOX_IMAGE, PROXY_IMAGE):
        try:
            docker_client.images.get(image)
        except docker.errors.ImageNotFound:
            pytest.fail(f"{image} is missing; build it first", pytrace=False)
    _ensure_egress_network_sync(docker_client)  # shared, persistent: never removed here
    certs = Path(tempfile.mkdtemp(prefix="corral-egress-certs-"))
    started: list[Any] = []
    try:
        ca_pem = _make_certs(certs)
        a = _start_site(docker_client, certs, "hello from site", 443, [], started)
        b = _start_site(docker_client, certs, "hello from alt", 8443, [], started)
        # `other` also answers to SITE's name on corral-egress: the DNS trick.
        c = _start_site(docker_client, certs, "hello from other", 443, [SITE], started)
        yield Sites(
            site=Site(SITE, a, 443, "hello from site"),
            alt=Site(ALT, b, 8443, "hello from alt"),
            other=Site(OTHER, c, 443, "hello from other"),
            ca_pem=ca_pem,
        )
    finally:
        for container in started:
            container.stop()  # removes it (testcontainers' stop is a forced remove)
        shutil.rmtree(certs, ignore_errors=True)


def session(backend: DockerBackend, sites: Sites, **kwargs: Any) -> SessionEgress:
    override = {SITE: sites.site.ip, ALT: sites.alt.ip}
    return SessionEgress(
        backend,
        session_id=new_session_id(),
        agent="test-egress",
        allowed_hosts=kwargs.pop("allowed_hosts", [SITE, ALT]),
        resolve_override=kwargs.pop("resolve_override", override),
        **kwargs,
    )


# ---------------------------------------------------------------- probes in containers

PROBE_SCRIPT = r"""
import concurrent.futures, json, os, socket, ssl, threading
CA = os.environ.get("CA_PEM", "")
PROBES = json.loads(os.environ["PROBES"])

def head_of(sock):
    buf = b""
    while b"\r\n\r\n" not in buf and len(buf) < 65536:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\r\n", 1)[0].decode(errors="replace")

def https_get(sock, host, path):
    tls = ssl.create_default_context(cadata=CA).wrap_socket(sock, server_hostname=host)
    request = "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)
    tls.sendall(request.encode())
    data = b""
    while True:
        chunk = tls.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n\r\n", 1)[1].decode()

def run(p):
    op = p["op"]
    try:
        if op == "proxy":  # send raw bytes to the proxy; tunnel TLS if it answers 200
            sock = socket.create_connection((p.get("proxy", "proxy"), 3128), timeout=10)
            with sock:
                sock.sendall(p["data"].encode())
                status = head_of(sock)
                out = {"status": status}
                if " 200 " in status and p.get("tls_host"):
                    out["body"] = https_get(sock, p["tls_host"], p.get("path", "/"))
                return out
        if op == "tls":  # direct HTTPS, no proxy (controls)
            sock = socket.create_connection((p["addr"], p["port"]), timeout=5)
            with sock:
                return {"body": https_get(sock, p["tls_host"], "/")}
        if op == "tcp":
            sock = socket.create_connection((p["addr"], p["port"]), timeout=p.get("timeout", 3))
            with sock:
                return {"connected": sock.recv(4).decode()}
        if op == "resolve":  # bounded: a dropped query would otherwise take ~10 s to fail
            box = {}
            def lookup():
                try:
                    box["resolved"] = socket.gethostbyname(p["name"])
                except Exception as exc:
                    box["error"] = type(exc).__name__ + ": " + str(exc)
            worker = threading.Thread(target=lookup, daemon=True)
            worker.start()
            worker.join(p.get("timeout", 3))
            return dict(box) or {"error": "timeout"}
    except Exception as exc:
        return {"error": type(exc).__name__ + ": " + str(exc)}
    return {"error": "unknown op"}

with concurrent.futures.ThreadPoolExecutor(16) as pool:
    results = dict(zip([p["id"] for p in PROBES], pool.map(run, PROBES)))
print(json.dumps(results))
"""


def run_probes(
    client: docker.DockerClient,
    network: str,
    probes: Sequence[Mapping[str, Any]],
    *,
    dns: Sequence[str],
    ca_pem: str = "",
) -> dict[str, dict[str, str]]:
    """Run the probes in a fresh hardened container attached ONLY to `network`."""
    container = client.containers.create(
        SANDBOX_IMAGE,
        ["python3", "-c", PROBE_SCRIPT],
        labels=control_labels("test-egress-probe"),
        environment={"PROBES": json.dumps(list(probes)), "CA_PEM": ca_pem},
        user="1000:1000",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        network=network,
        dns=list(dns),
        mem_limit=256 * 1024**2,
        pids_limit=64,
        detach=True,
    )
    try:
        container.start()
        status = container.wait(timeout=120)
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
        assert status["StatusCode"] == 0, err
        result: dict[str, dict[str, str]] = json.loads(out)
        return result
    finally:
        container.remove(force=True)


async def probes(
    client: docker.DockerClient,
    network: str,
    items: Sequence[Mapping[str, Any]],
    *,
    dns: Sequence[str],
    ca_pem: str = "",
) -> dict[str, dict[str, str]]:
    def call() -> dict[str, dict[str, str]]:
        return run_probes(client, network, items, dns=dns, ca_pem=ca_pem)

    result: dict[str, dict[str, str]] = await anyio.to_thread.run_sync(call)
    return result


def connect(
    target: str, *, id: str, tls_host: str | None = None, extra: str = ""
) -> dict[str, Any]:
    data = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{extra}\r\n"
    return {"id": id, "op": "proxy", "data": data, "tls_host": tls_host, "path": f"/{MARKER}"}


def iptables_rules(tool: str = "iptables") -> str:
    return subprocess.run([tool, "-S", "INPUT"], capture_output=True, text=True, check=True).stdout


def network_exists(client: docker.DockerClient, name: str) -> bool:
    return any(n.name == name for n in client.networks.list(names=[name]))


def container_exists(client: docker.DockerClient, container_id: str) -> bool:
    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return False
    return True


def assert_gone(client: docker.DockerClient, eg: SessionEgress, proxy_id: str | None) -> None:
    assert not network_exists(client, f"corral-s-{eg.session_id}")
    if proxy_id is not None:
        assert not container_exists(client, proxy_id)
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool):
            assert eg.bridge not in iptables_rules(tool), tool
    leftovers = client.containers.list(
        ignore_removed=True, all=True, filters={"label": f"corral.session={eg.session_id}"}
    )
    assert not leftovers


# ---------------------------------------------------------------- the tests


async def test_only_connect_to_pinned_hosts_on_443_gets_through(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient
) -> None:
    eg = session(backend, sites)
    async with eg:
        assert eg.network_name == f"corral-s-{eg.session_id}"
        assert eg.proxy_url == PROXY_URL == "http://proxy:3128"
        assert eg.pins == {SITE: (sites.site.ip,), ALT: (sites.alt.ip,)}
        proxy_id = eg.proxy_container_id
        assert proxy_id is not None
        rules = iptables_rules()
        assert f"-A INPUT -i {eg.bridge} -m conntrack --ctstate NEW -j DROP" in rules
        if shutil.which("ip6tables"):
            assert f"-A INPUT -i {eg.bridge} -m conntrack --ctstate NEW -j DROP" in (
                iptables_rules("ip6tables")
            )
        proxy = docker_client.containers.get(proxy_id)
        host_config = proxy.attrs["HostConfig"]
        assert host_config["ReadonlyRootfs"] is True
        assert host_config["CapDrop"] == ["ALL"]
        assert host_config["SecurityOpt"] == ["no-new-privileges"]
        assert host_config["PidsLimit"] == 64
        assert host_config["Memory"] == 128 * 1024**2
        assert proxy.attrs["Config"]["User"] == "1000:1000"
        assert proxy.labels["corral.kind"] == "proxy"
        assert proxy.labels["corral.session"] == eg.session_id
        assert proxy.labels["corral.instance"] == backend.owner.instance_id
        networks = proxy.attrs["NetworkSettings"]["Networks"]
        assert set(networks) == {EGRESS_NETWORK, eg.network_name}
        assert "proxy" in networks[eg.network_name]["Aliases"]
        net = docker_client.networks.get(eg.network_name)
        assert net.attrs["Internal"] is True
        assert net.attrs["Options"]["com.docker.network.bridge.name"] == eg.bridge
        assert net.attrs["Labels"][LABEL_KIND] == KIND_SESSION_NETWORK

        big = "X-Pad: " + "a" * 9000 + "\r\n"
        items = [
            connect(f"{SITE}:443", id="allowed", tls_host=SITE),
            connect("SITE.Corral.Test:443", id="upper_case", tls_host=SITE),
            connect(f"{SITE}.:443", id="trailing_dot", tls_host=SITE),
            connect(f"{OTHER}:443", id="not_listed", tls_host=OTHER),
            connect(f"{ALT}:8443", id="listed_other_port", tls_host=ALT),
            connect(f"{ALT}:443", id="listed_nothing_on_443"),
            connect(f"{sites.site.ip}:443", id="raw_ip", tls_host=SITE),
            connect(f"{SITE}:443", id="oversized", extra=big),
            connect(f"{SITE}:443", id="secret_header", tls_host=SITE, extra=f"X-S: {MARKER}\r\n"),
            {
                "id": "plain_get",
                "op": "proxy",
                "data": f"GET http://{SITE}/{MARKER} HTTP/1.1\r\nHost: {SITE}\r\n\r\n",
            },
            {"id": "garbage", "op": "proxy", "data": "HELLO\r\n\r\n"},
        ]
        got = await probes(
            docker_client, eg.network_name, items, dns=eg.dns_servers, ca_pem=sites.ca_pem
        )
        assert got["allowed"] == {
            "status": "HTTP/1.1 200 Connection established",
            "body": "hello from site",
        }
        assert got["upper_case"]["body"] == "hello from site"
        assert got["secret_header"]["body"] == "hello from site"
        for key in ("trailing_dot", "not_listed", "listed_other_port", "raw_ip", "plain_get"):
            assert got[key] == {"status": "HTTP/1.1 403 Forbidden"}, (key, got[key])
        assert got["listed_nothing_on_443"] == {"status": "HTTP/1.1 502 Bad Gateway"}
        assert got["oversized"] == {"status": "HTTP/1.1 400 Bad Request"}
        assert got["garbage"] == {"status": "HTTP/1.1 400 Bad Request"}

        # Controls from corral-egress: the refused sites do answer when asked directly,
        # so each refusal above is the proxy's doing. And the proxy refuses a peer that
        # is not on the session network.
        control = await probes(
            docker_client,
            EGRESS_NETWORK,
            [
                {
                    "id": "other",
                    "op": "tls",
                    "addr": sites.other.ip,
                    "port": 443,
                    "tls_host": OTHER,
                },
                {"id": "alt", "op": "tls", "addr": sites.alt.ip, "port": 8443, "tls_host": ALT},
                {**connect(f"{SITE}:443", id="foreign_peer"), "proxy": eg.proxy_egress_ip},
            ],
            dns=[bridge_gateway()],
            ca_pem=sites.ca_pem,
        )
        assert control["other"] == {"body": "hello from other"}
        assert control["alt"] == {"body": "hello from alt"}
        assert control["foreign_peer"] == {"status": "HTTP/1.1 403 Forbidden"}

        log = proxy.logs().decode()
        decisions = [line for line in log.splitlines() if " decision=" in line]
        assert any(f"host={SITE} port=443 decision=allow" in d for d in decisions), log
        assert any(
            f"host={OTHER} port=443 decision=refuse reason=host_not_pinned" in d for d in decisions
        )
        assert any(
            f"host={ALT} port=8443 decision=refuse reason=port_not_allowed" in d for d in decisions
        )
        assert any("reason=method_not_allowed" in d for d in decisions)
        assert any("reason=peer_not_allowed" in d for d in decisions)
        assert len(decisions) == len(items) + 1, log  # one line per decision, probes silent
        assert MARKER not in log  # never payloads, paths or header values
    assert_gone(docker_client, eg, proxy_id)


async def test_no_direct_path_out_of_the_session_network(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient, host_listener: int
) -> None:
    docker0 = bridge_gateway()
    async with session(backend, sites) as eg:
        assert eg.network_name is not None and eg.gateway is not None
        port = host_listener
        got = await probes(
            docker_client,
            eg.network_name,
            [
                {"id": "site_direct", "op": "tcp", "addr": sites.site.ip, "port": 443},
                {"id": "gateway", "op": "tcp", "addr": eg.gateway, "port": port},
                {"id": "docker0", "op": "tcp", "addr": docker0, "port": port},
                {"id": "proxy_name", "op": "resolve", "name": "proxy"},
            ],
            dns=eg.dns_servers,
        )
        for key in ("site_direct", "gateway", "docker0"):
            assert "error" in got[key], (key, got[key])
        # The gateway is on-link: only the INPUT rule stops that SYN (it times out).
        assert "timed out" in got["gateway"]["error"], got["gateway"]
        # The kiosk's `dns` setting keeps the name of the proxy resolvable.
        assert got["proxy_name"]["resolved"] == _proxy_ip(docker_client, eg)

        # Control: from the default bridge the same listener answers on both addresses,
        # so it was reachable and it is the session network's rule that blocks it.
        control = await probes(
            docker_client,
            "bridge",
            [
                {"id": "gateway", "op": "tcp", "addr": eg.gateway, "port": port},
                {"id": "docker0", "op": "tcp", "addr": docker0, "port": port},
            ],
            dns=[docker0],
        )
        assert control == {"gateway": {"connected": "pong"}, "docker0": {"connected": "pong"}}


def _proxy_ip(client: docker.DockerClient, eg: SessionEgress) -> str:
    assert eg.proxy_container_id is not None and eg.network_name is not None
    attrs = client.containers.get(eg.proxy_container_id).attrs
    return str(attrs["NetworkSettings"]["Networks"][eg.network_name]["IPAddress"])


async def test_the_input_rule_is_what_closes_the_host(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient, host_listener: int
) -> None:
    """Without the rule (removed here by hand), `internal=True` alone lets a session
    container reach this host's services through the gateway, TCP and UDP (DNS) alike."""
    async with session(backend, sites) as eg:
        assert eg.network_name is not None and eg.gateway is not None
        dns_sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        dns_sink.bind((eg.gateway, 53))  # the session bridge's own address: nothing else uses it
        dns_sink.setblocking(False)
        try:
            name = f"leak-{secrets.token_hex(4)}.corral.test"
            item: list[dict[str, Any]] = [
                {"id": "gateway", "op": "tcp", "addr": eg.gateway, "port": host_listener},
                {"id": "dns", "op": "resolve", "name": name},
            ]
            closed = await probes(docker_client, eg.network_name, item, dns=eg.dns_servers)
            assert "timed out" in closed["gateway"]["error"], closed
            assert "error" in closed["dns"], closed
            with pytest.raises(BlockingIOError):
                dns_sink.recv(4096)  # the query (sent seconds ago) was dropped too

            await remove_input_drop(eg.bridge)
            assert eg.bridge not in iptables_rules()
            opened = await probes(docker_client, eg.network_name, item, dns=eg.dns_servers)
            assert opened["gateway"] == {"connected": "pong"}, opened

            def received() -> bytes | None:
                try:
                    return dns_sink.recv(4096)
                except BlockingIOError:
                    return None

            query = await wait_until(received, limit=10)
            assert name.split(".")[0].encode() in query
        finally:
            dns_sink.close()


async def test_pins_hold_when_the_name_later_resolves_elsewhere(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient
) -> None:
    """On corral-egress, SITE's name now belongs to the `other` site (a network alias),
    yet the proxy connects to the address pinned at session start: it never resolves."""
    async with session(backend, sites) as eg:
        assert eg.network_name is not None
        premise = await probes(
            docker_client,
            EGRESS_NETWORK,
            [{"id": "dns", "op": "resolve", "name": SITE}],
            dns=[bridge_gateway()],  # an unexpected forward could only reach this host
        )
        assert premise["dns"] == {"resolved": sites.other.ip}
        assert sites.other.ip != sites.site.ip
        got = await probes(
            docker_client,
            eg.network_name,
            [connect(f"{SITE}:443", id="tunnel", tls_host=SITE)],
            dns=eg.dns_servers,
            ca_pem=sites.ca_pem,
        )
        assert got["tunnel"]["body"] == "hello from site"


async def test_a_host_dropped_from_the_allowlist_loses_its_route_at_once(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient
) -> None:
    async with session(backend, sites) as eg:
        assert eg.network_name is not None

        async def ask() -> dict[str, dict[str, str]]:
            assert eg.network_name is not None
            return await probes(
                docker_client,
                eg.network_name,
                [
                    connect(f"{SITE}:443", id="site", tls_host=SITE),
                    connect(f"{ALT}:443", id="alt"),
                ],
                dns=eg.dns_servers,
                ca_pem=sites.ca_pem,
            )

        before = await ask()
        await eg.restrict([ALT])
        after = await ask()

    assert before["site"]["body"] == "hello from site"
    assert " 403 " in after["site"]["status"]  # host_not_pinned now
    # ALT keeps its pin (its server listens on 8443 only, so 443 is unreachable: 502).
    assert " 502 " in before["alt"]["status"] and " 502 " in after["alt"]["status"]
    assert set(eg.pins) == {ALT}


async def test_empty_allowlist_creates_nothing(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient
) -> None:
    eg = session(backend, sites, allowed_hosts=[], resolve_override={})
    async with eg:
        assert eg.network_name is None
        assert eg.proxy_url is None
        assert eg.pins == {}
        assert eg.dns_servers == []
        assert eg.bridge not in iptables_rules()
        # Nothing of this session's, by name or label (others may run beside this test).
        assert [n.name for n in docker_client.networks.list() if eg.session_id in n.name] == []
        assert (
            docker_client.networks.list(filters={"label": f"corral.session={eg.session_id}"}) == []
        )
    assert_gone(docker_client, eg, None)


async def test_cleanup_after_a_failed_enter(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient
) -> None:
    missing = session(backend, sites, image="corral-proxy-missing:none")
    with pytest.raises(SandboxUnavailable) as info:
        async with missing:
            pytest.fail("entered without a proxy image")
    assert info.value.code is UnavailableCode.IMAGE_MISSING
    assert_gone(docker_client, missing, None)

    # An image that exits at once (the sandbox prints its version): enter fails after
    # the container was started and connected.
    from orchestrator.errors import EgressError

    exits = session(backend, sites, image=SANDBOX_IMAGE)
    with pytest.raises(EgressError, match="exited with code 0"):
        async with exits:
            pytest.fail("entered with a proxy that is not running")
    assert_gone(docker_client, exits, None)


async def test_cancelled_enter_leaves_nothing(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient
) -> None:
    eg = session(backend, sites)
    name = f"corral-s-{eg.session_id}"
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_once_the_network_exists() -> None:
                await wait_until(
                    lambda: anyio.to_thread.run_sync(network_exists, docker_client, name)
                )
                scope.cancel()

            tg.start_soon(cancel_once_the_network_exists)
            async with eg:
                await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert_gone(docker_client, eg, None)


async def test_reap_networks_removes_only_orphans(
    backend: DockerBackend, sites: Sites, docker_client: docker.DockerClient
) -> None:
    """A dead owner's session network and its rule go; a rule with no network goes; a
    live session's network and rule stay.

    The dead owner's network and the stray rule are orphans to every reaper on this
    machine, and the other test worker's gateways reap at their start: when one of them
    took ours first (gone, but not in our answer), the orphans are made again and the
    reap asked again. Anything still there after our reap is a failure at once."""
    async with session(backend, sites) as live:
        for _ in range(5):
            made = await _orphans(docker_client)
            try:
                assert {made.bridge, made.stray, live.bridge} <= await input_drop_bridges()
                reaped = await reap_networks(
                    backend,
                    stale_after=None,
                    label_filters={"corral.instance": made.owner},
                    sweep_rules={made.bridge, made.stray, live.bridge},
                )
                bridges = await input_drop_bridges()
                taken_by_another = (
                    reaped.networks != (made.network,) or set(reaped.rules) != made.rules
                ) and not (network_exists(docker_client, made.network) or made.rules & bridges)
            finally:
                await made.remove(docker_client)
            if not taken_by_another:
                break
        assert reaped.networks == (made.network,)
        assert set(reaped.rules) == made.rules
        assert made.bridge not in bridges and made.stray not in bridges
        assert live.bridge in bridges
        assert live.network_name is not None
        assert network_exists(docker_client, live.network_name)

        # The live owner's own network (proxy attached) is kept even when "stale".
        reaped = await reap_networks(
            backend,
            stale_after=0.0,
            label_filters={"corral.session": live.session_id},
            sweep_rules={live.bridge},
        )
        assert reaped.networks == () and reaped.rules == ()
        assert network_exists(docker_client, live.network_name)


async def test_a_reap_keeps_the_rule_of_a_bridge_another_engine_still_has(
    backend: DockerBackend,
) -> None:
    """The attack on the host's firewall by accident: a second engine on this host (the
    faults suite runs one) reaps at its gateway's start, sees none of this engine's
    session networks, and took their INPUT drop rules for orphans: a live session network
    was then open to the host. A bridge the host still has keeps its rule; once the bridge
    is gone, the rule goes."""
    bridge = f"crl{new_session_id()}"  # another engine's session bridge, as the host sees it
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    try:
        await add_input_drop(bridge)
        reaped = await reap_networks(backend, stale_after=None, sweep_rules={bridge})
        assert bridge not in reaped.rules
        assert bridge in await input_drop_bridges()
    finally:
        subprocess.run(["ip", "link", "delete", bridge], check=False)
    reaped = await reap_networks(backend, stale_after=None, sweep_rules={bridge})
    assert bridge in reaped.rules or bridge not in await input_drop_bridges()
    assert bridge not in await input_drop_bridges()


async def test_two_removers_of_one_rule_at_once_both_succeed_and_it_is_gone() -> None:
    """A session's end removes its bridge's INPUT rule while another process's reaper,
    which saw the bridge already gone, removes the same rule: the loser's delete finds no
    rule. That is the rule gone, as asked, not a failure of the session's cleanup (it
    failed the session's end before, under load)."""
    for _ in range(5):
        bridge = f"crl{new_session_id()}"
        await add_input_drop(bridge)
        results: list[int | Exception] = []

        async def remove(bridge: str = bridge, results: list[int | Exception] = results) -> None:
            try:
                results.append(await remove_input_drop(bridge))
            except Exception as exc:  # the assertion below names it
                results.append(exc)

        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(remove)
        assert not [r for r in results if isinstance(r, Exception)], results
        assert sum(r for r in results if isinstance(r, int)) >= 1
        assert bridge not in await input_drop_bridges()


@dataclass
class Orphans:
    owner: str  # the dead owner's instance id
    network: str
    network_id: str
    bridge: str  # the network's bridge, with an INPUT drop rule
    stray: str  # a bridge with a rule and no network

    @property
    def rules(self) -> set[str]:
        return {self.bridge, self.stray}

    async def remove(self, client: docker.DockerClient) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_network(self.network_id)
        await remove_input_drop(self.bridge)
        await remove_input_drop(self.stray)


async def _orphans(client: docker.DockerClient) -> Orphans:
    """A session network of a dead owner (a pid that cannot run here) with its rule, and a
    rule whose network is already gone."""
    dead_owner = Owner(secrets.token_hex(8), 4_000_000, 1, read_boot_id(), socket.gethostname())
    orphan_id, stray_id = new_session_id(), new_session_id()
    labels = {**dead_owner.labels(kind="proxy", agent="t", session=orphan_id)}
    labels[LABEL_KIND] = KIND_SESSION_NETWORK
    created = client.api.create_network(
        f"corral-s-{orphan_id}",
        driver="bridge",
        internal=True,
        options={"com.docker.network.bridge.name": f"crl{orphan_id}"},
        labels=labels,
    )
    made = Orphans(
        dead_owner.instance_id,
        f"corral-s-{orphan_id}",
        created["Id"],
        f"crl{orphan_id}",
        f"crl{stray_id}",
    )
    await add_input_drop(made.bridge)
    await add_input_drop(made.stray)
    return made
