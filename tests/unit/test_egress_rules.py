"""Egress rules that need no engine: host-name policy, pin resolution, the orphan
decision, and the proxy's own parsing and bounds on loopback (SPEC S2.6). The same code
against the real engine: tests/integration/test_egress.py."""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.docker.egress import SessionEgress
from orchestrator.backends.docker.network_reaper import network_is_orphan, rule_is_orphan
from orchestrator.backends.docker.networks import KIND_SESSION_NETWORK, new_session_id
from orchestrator.backends.owner import Owner, read_boot_id, read_start_time
from orchestrator.backends.pins import resolve_pins
from sandboxes.hostnames import normalise_host
from tests.helpers import wait_until

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]
SITE = "site.corral.test"


# ---------------------------------------------------------------- pure parts


def test_normalise_host_refuses_dot_games_and_canonicalises() -> None:
    assert normalise_host("Site.Corral.TEST") == SITE
    assert normalise_host("[::FFFF:7f00:1]") == "::ffff:7f00:1"
    assert normalise_host(" 10.1.2.3 ") == "10.1.2.3"
    bad_hosts = ("site.corral.test.", ".site", "a..b", "-a.b", "a b", "", "a_b.test", "é.test")
    for bad in (*bad_hosts, "010.1.2.3", "1.2.3", "0x7f.1"):
        with pytest.raises(ValueError):
            normalise_host(bad)


async def test_resolve_pins_overrides_literals_and_refuses_non_global() -> None:
    asked: list[str] = []

    def fake(host: str) -> list[str]:
        asked.append(host)
        return {
            "doc.test": ["198.51.100.7", "198.51.100.7", "192.0.2.1"],
            "private.test": ["10.0.0.5", "127.0.0.1"],
        }.get(host, [])

    hosts = ["Doc.test", "private.test", "gone.test", "mapped.test", "203.0.113.9", "10.9.9.9"]
    pins, left_out = await resolve_pins(hosts, {"MAPPED.test": "172.17.0.99"}, resolver=fake)
    # 198.51.100.0/24 and 192.0.2.0/24 are documentation ranges: not public addresses.
    assert pins == {"mapped.test": ("172.17.0.99",)}
    assert set(left_out) == {"doc.test", "private.test", "gone.test", "203.0.113.9", "10.9.9.9"}
    assert "10.0.0.5 (private), 127.0.0.1 (loopback)" in left_out["private.test"]
    assert "resolve_overrides" in left_out["private.test"]
    assert left_out["gone.test"] == "the name does not resolve"
    assert sorted(asked) == ["doc.test", "gone.test", "private.test"]  # literals/overrides


async def test_an_unrelated_override_lets_no_other_name_reach_a_private_address() -> None:
    """Before: one override switched the private-address filter off for every name."""
    answers = {
        "loop.test": ["127.0.0.1"],
        "ten.test": ["10.1.2.3"],
        "bridge.test": ["172.17.0.1"],
        "metadata.test": ["169.254.169.254"],
        "public.test": ["8.8.8.8", "10.0.0.1"],
    }

    pins, left_out = await resolve_pins(
        [*answers, "mine.test"], {"mine.test": "172.18.0.5"}, resolver=lambda h: answers[h]
    )

    assert pins == {"mine.test": ("172.18.0.5",), "public.test": ("8.8.8.8",)}
    assert "loopback" in left_out["loop.test"]
    assert "private" in left_out["ten.test"] and "private" in left_out["bridge.test"]
    assert "link-local" in left_out["metadata.test"]


async def test_a_name_that_does_not_answer_in_time_is_left_out_saying_so() -> None:
    import time as _time

    def slow(host: str) -> list[str]:
        _time.sleep(0.5)
        return ["8.8.8.8"]

    pins, left_out = await resolve_pins(["slow.test"], resolver=slow, resolve_seconds=0.05)

    assert pins == {}
    assert left_out == {"slow.test": "no DNS answer within 0.05 s"}


def test_network_is_orphan_decisions() -> None:
    boot = read_boot_id()
    host = socket.gethostname()
    me = Owner.current().labels(kind=KIND_SESSION_NETWORK, agent="a", session="s")
    dead = Owner("x", 4_000_000, 1, boot, host).labels(kind="egress-net", agent="a", session="s")
    elsewhere = {**dead, "corral.owner.host": "another-host"}
    common: dict[str, Any] = {
        "host": host,
        "boot_id": boot,
        "stale_after": 600.0,
        "start_time_of": read_start_time,
    }
    assert network_is_orphan(dead, attached=0, age_seconds=1, **common)
    assert not network_is_orphan(dead, attached=1, age_seconds=9999, **common)
    assert not network_is_orphan(me, attached=0, age_seconds=10, **common)
    assert network_is_orphan(me, attached=0, age_seconds=601, **common)
    assert not network_is_orphan(elsewhere, attached=0, age_seconds=9999, **common)
    assert not network_is_orphan(
        me, attached=0, age_seconds=9999, **{**common, "stale_after": None}
    )


def test_a_rule_goes_only_when_its_network_was_reaped_or_its_bridge_is_gone() -> None:
    """The INPUT rules are the host's; one engine's network list is not the host's. A
    bridge this host still has may be another engine's live session network: its rule
    stays (else that network would be open to the host)."""
    on_host = {"crlother", "crlreaped"}.__contains__
    assert rule_is_orphan("crlreaped", {"crlreaped"}, on_host)  # this sweep removed it
    assert rule_is_orphan("crlgone", set(), on_host)  # no network, no bridge: dead rule
    assert not rule_is_orphan("crlother", set(), on_host)  # another engine's bridge


def _load_proxy_module() -> ModuleType:
    # proxy.py imports its sibling proxy_request.py, as it does in the image (/opt/corral),
    # and sandboxes.hostnames, which the image carries under its own path.
    folder = str(REPO / "rig_images/proxy")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("corral_proxy", f"{folder}/proxy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_proxy_request_parsing() -> None:
    proxy = _load_proxy_module()
    assert proxy.parse_request(b"CONNECT Site.Corral.Test:443 HTTP/1.1\r\nHost: x") == (SITE, "443")
    refusals = {
        b"GET http://site.corral.test/ HTTP/1.1\r\nHost: x": (403, "method_not_allowed"),
        b"CONNECT site.corral.test:8443 HTTP/1.1": (403, "port_not_allowed"),
        b"CONNECT site.corral.test:0443 HTTP/1.1": (403, "port_not_allowed"),
        b"CONNECT site.corral.test.:443 HTTP/1.1": (403, "bad_host"),
        b"CONNECT site.corral.test%00:443 HTTP/1.1": (403, "bad_host"),
        b"CONNECT 0177.0.0.1:443 HTTP/1.1": (403, "bad_host"),
        b"CONNECT site.corral.test HTTP/1.1": (400, "bad_authority"),
        b"CONNECT  site.corral.test:443 HTTP/1.1": (400, "bad_request_line"),
        b"CONNECT site.corral.test:443 HTTP/2": (400, "bad_version"),
        b"CONNECT site.corral.test:443 HTTP/1.1\r\nno colon": (400, "bad_header"),
        b"CONNECT s\xc3\xa9.test:443 HTTP/1.1": (400, "non_ascii"),
    }
    for head, (status, reason) in refusals.items():
        with pytest.raises(proxy.Refusal) as info:
            proxy.parse_request(head)
        assert (info.value.status, info.value.reason) == (status, reason), head
    pins = proxy.load_pins('{"A.test": ["192.0.2.1"], "[::1]": ["::1"]}')
    assert pins == {"a.test": ("192.0.2.1",), "::1": ("::1",)}
    for bad in ('{"a.test": ["a.test"]}', '{"a.test": []}', '{"a.test.": ["192.0.2.1"]}', "[]"):
        with pytest.raises(ValueError):
            proxy.load_pins(bad)


async def test_proxy_bounds_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy itself, in this process on 127.0.0.1 only: header read timeout, tunnel
    cap, bytes sent with the CONNECT forwarded, and the tunnel ends when a side closes."""
    import asyncio

    proxy = _load_proxy_module()

    echo_active = 0

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal echo_active
        echo_active += 1
        try:
            while data := await reader.readline():  # echo lines; close after "bye"
                writer.write(b"echo:" + data)
                await writer.drain()
                if data == b"bye\n":
                    break
        finally:
            writer.close()
            echo_active -= 1

    echo = await asyncio.start_server(upstream, "127.0.0.1", 0)
    echo_port = echo.sockets[0].getsockname()[1]
    monkeypatch.setattr(proxy, "UPSTREAM_PORT", echo_port)
    monkeypatch.setattr(sys.modules["proxy_request"], "UPSTREAM_PORT", echo_port)
    monkeypatch.setattr(proxy, "HEADER_TIMEOUT", 0.3)
    monkeypatch.setattr(proxy, "MAX_TUNNELS", 1)
    handler = proxy.Proxy({"echo.test": ("127.0.0.1",)}, None)
    server = await asyncio.start_server(handler.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def open_tunnel(early: bytes = b"") -> tuple[Any, Any, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"CONNECT echo.test:{echo_port} HTTP/1.1\r\n\r\n".encode() + early)
        status = await reader.readuntil(b"\r\n\r\n")
        return reader, writer, status

    try:
        async with asyncio.timeout(20):
            slow_r, slow_w = await asyncio.open_connection("127.0.0.1", port)
            slow_w.write(b"CONNECT echo.test")  # ... and never the rest
            assert (await slow_r.read()).startswith(b"HTTP/1.1 408 ")
            slow_w.close()
            await slow_w.wait_closed()

            r1, w1, status = await open_tunnel(early=b"early\n")
            assert status == b"HTTP/1.1 200 Connection established\r\n\r\n"
            assert await r1.readline() == b"echo:early\n"
            _, w2, status = await open_tunnel()
            assert status.startswith(b"HTTP/1.1 503 ")  # the cap is 1 tunnel here
            w2.close()
            await w2.wait_closed()
            w1.write(b"bye\n")
            assert await r1.readline() == b"echo:bye\n"
            assert await r1.read() == b""  # upstream closed: so does the tunnel
            w1.close()
            await w1.wait_closed()
            r3, w3, status = await open_tunnel(early=b"again\n")
            assert status.startswith(b"HTTP/1.1 200 ")  # the slot was released
            assert await r3.readline() == b"echo:again\n"
            w3.close()
            await w3.wait_closed()
            await wait_until(lambda: handler.connections == 0 and echo_active == 0)
    finally:
        server.close()
        echo.close()
        await server.wait_closed()
        await echo.wait_closed()


async def test_an_idle_tunnel_is_closed_and_a_busy_one_is_not(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The proxy in this process on 127.0.0.1 only: no byte either way for IDLE_TIMEOUT
    closes the tunnel; traffic in either direction keeps it open.

    The proxy and the test share one event loop and its clock, so the bound is exact
    whatever the load: the proxy cannot have moved a byte before the test wrote its last
    one, so it cannot close the tunnel sooner than IDLE_TIMEOUT after that write. (Only a
    stall of the whole loop longer than the idle period, 10 times the pacing, could end
    the busy part early.)"""
    import asyncio

    proxy = _load_proxy_module()
    idle = 1.0
    monkeypatch.setattr(proxy, "IDLE_TIMEOUT", idle)
    async with proxy_on_loopback(proxy, monkeypatch, ["echo.test"]) as (_, port, echo_port):
        async with asyncio.timeout(20):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"CONNECT echo.test:{echo_port} HTTP/1.1\r\n\r\n".encode())
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
            loop = asyncio.get_running_loop()
            busy_until = loop.time() + 2.5 * idle  # traffic over more than two idle periods
            while True:
                last_write = loop.time()
                writer.write(b"ping\n")
                assert await reader.readline() == b"echo:ping\n"  # still open
                if loop.time() >= busy_until:
                    break
                await asyncio.sleep(idle / 10)  # pacing the traffic, not synchronising
            assert await reader.read() == b""  # then silence: the proxy closes it
            assert loop.time() - last_write >= idle  # not before a whole idle period
            writer.close()
            await writer.wait_closed()
    assert "decision=close reason=idle" in capfd.readouterr().err


def test_session_ids_fit_a_bridge_name() -> None:
    sid = new_session_id()
    assert len(sid) == 10 and len(f"crl{sid}") <= 15
    for bad in ("Bad-Id", "", "a" * 13, "abc/def"):
        with pytest.raises(ValueError):
            SessionEgress(
                DockerBackend(Owner.current()), session_id=bad, agent="a", allowed_hosts=[]
            )


async def test_restricting_the_proxy_closes_open_tunnels_of_dropped_hosts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy in this process on 127.0.0.1: a tunnel open to a host the gateway drops
    is closed at once; a tunnel to a kept host stays; a dropped host is refused after."""
    import asyncio

    proxy = _load_proxy_module()
    async with proxy_on_loopback(proxy, monkeypatch, ["a.test", "b.test"]) as served:
        handler, port, echo_port = served

        async def tunnel(host: str) -> tuple[Any, Any, bytes]:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"CONNECT {host}:{echo_port} HTTP/1.1\r\n\r\n".encode())
            return reader, writer, await reader.readuntil(b"\r\n\r\n")

        async with asyncio.timeout(20):
            ra, wa, status_a = await tunnel("a.test")
            rb, wb, status_b = await tunnel("b.test")
            assert b" 200 " in status_a and b" 200 " in status_b

            answer = proxy.control_answer(
                handler, b'{"id": 7, "op": "restrict", "hosts": ["b.test", "c.test"]}'
            )

            assert answer == {"id": 7, "ok": True, "hosts": ["b.test"]}  # never adds c.test
            assert await ra.read() == b""  # a.test's tunnel is closed
            wb.write(b"still\n")
            assert await rb.readline() == b"echo:still\n"
            _, wc, status_c = await tunnel("a.test")
            assert b" 403 " in status_c
            assert proxy.control_answer(handler, b"nonsense")["ok"] is False
            for writer in (wa, wb, wc):
                writer.close()
            await asyncio.gather(*(w.wait_closed() for w in (wa, wb, wc)), return_exceptions=True)
            await wait_until(lambda: handler.connections == 0)


@contextlib.asynccontextmanager
async def proxy_on_loopback(
    proxy: ModuleType, monkeypatch: pytest.MonkeyPatch, hosts: list[str]
) -> AsyncIterator[tuple[Any, int, int]]:
    """The proxy module's server on 127.0.0.1, pinning `hosts` to a line-echo server there:
    (the proxy handler, its port, the echo server's port); both closed on exit."""
    import asyncio

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.readline():
                writer.write(b"echo:" + data)
                await writer.drain()
        writer.close()

    echo = await asyncio.start_server(upstream, "127.0.0.1", 0)
    echo_port = echo.sockets[0].getsockname()[1]
    monkeypatch.setattr(proxy, "UPSTREAM_PORT", echo_port)
    monkeypatch.setattr(sys.modules["proxy_request"], "UPSTREAM_PORT", echo_port)
    handler = proxy.Proxy({host: ("127.0.0.1",) for host in hosts}, None)
    server = await asyncio.start_server(handler.handle, "127.0.0.1", 0)
    try:
        yield handler, server.sockets[0].getsockname()[1], echo_port
    finally:
        server.close()
        echo.close()
        await server.wait_closed()
        await echo.wait_closed()


async def test_an_armed_proxy_refuses_everything_until_pinned_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A warm pool's proxy (CORRAL_PIN_LATER, no pins) refuses every host; its one `pin`
    op opens exactly the pinned hosts; a second `pin` (widening it later) is refused, as is
    `pin` on a proxy started with its pins."""
    import asyncio

    proxy = _load_proxy_module()
    async with proxy_on_loopback(proxy, monkeypatch, []) as served:
        handler, port, echo_port = served
        handler.pin_later = True

        async def status(host: str) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"CONNECT {host}:{echo_port} HTTP/1.1\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            writer.close()
            return head

        async with asyncio.timeout(20):
            assert b" 403 " in await status("a.test")  # armed: nothing is pinned
            pin = b'{"id": 1, "op": "pin", "pins": {"A.test": ["127.0.0.1"]}}'
            assert proxy.control_answer(handler, pin) == {"id": 1, "ok": True, "hosts": ["a.test"]}
            assert b" 200 " in await status("a.test")
            assert b" 403 " in await status("b.test")
            widen = b'{"id": 2, "op": "pin", "pins": {"b.test": ["127.0.0.1"]}}'
            refused = proxy.control_answer(handler, widen)
            assert refused["ok"] is False and "set already" in refused["error"]
            assert b" 403 " in await status("b.test")
            await wait_until(lambda: handler.connections == 0)

    started_pinned = proxy.Proxy({"a.test": ("127.0.0.1",)}, None)
    answer = proxy.control_answer(started_pinned, b'{"id": 3, "op": "pin", "pins": {}}')
    assert answer["ok"] is False
    fresh = proxy.Proxy({}, None)
    fresh.pin_later = True
    bad = b'{"id": 4, "op": "pin", "pins": {"a.test": ["not-an-address"]}}'
    assert proxy.control_answer(fresh, bad)["ok"] is False  # addresses only, never names
    assert fresh.pins == {} and fresh.pin_later is True
