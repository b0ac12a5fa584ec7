"""corral-proxy: the only way out of a kiosk session (docs/kiosk-internals.md section 3).

An allowlisting HTTP CONNECT proxy. Standard library only; runs as uid 1000 in
a read-only container attached to the session's internal network (alias
`proxy`) and to the shared `corral-egress` network.

Configuration (environment):
  CORRAL_PINS        JSON {"host.example": ["203.0.113.7", ...]}: the only host names
                     a client may ask for, and the only addresses the proxy connects to
                     for each. Resolved by the gateway at session start: this process
                     never resolves a name.
  CORRAL_ALLOW_FROM  optional CIDR (the session network's subnet): requests from any
                     other peer are refused.
  CORRAL_LISTEN_PORT optional, default 3128.
  CORRAL_CONTROL     "stdin": read control requests from stdin, one JSON line each,
                     and answer on stdout (the gateway attaches to both):
                       {"id": 1, "op": "restrict", "hosts": ["a.example"]}
                     keeps only the listed hosts' pins (never adds one: a host that was
                     not pinned at start stays refused) and closes every open tunnel to
                     a host it drops; the answer is {"id": 1, "ok": true, "hosts": [...]}.
                       {"id": 2, "op": "pin", "pins": {"a.example": ["203.0.113.7"]}}
                     sets the pins once, on a proxy started with CORRAL_PIN_LATER=1 and
                     no pins (a warm pool's, made before its session's allowlist was
                     known); refused otherwise, and refused a second time: a proxy is
                     never widened after its first pins.

Accepted: exactly `CONNECT host:443 HTTP/1.1` (or HTTP/1.0) where `host`, lower-cased,
is a key of the pins. Then the proxy connects to one of that host's pinned
addresses on port 443, answers 200 and splices bytes both ways until either
side closes. Everything else is refused (403, or 400 when malformed) and
closed. One line per decision goes to stderr (peer, host, port, decision,
reason); payload bytes are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import signal
import sys
import time

from proxy_request import UPSTREAM_PORT, Refusal, load_pins, parse_request

from sandboxes.hostnames import normalise_host

LISTEN_HOST = "0.0.0.0"
MAX_HEADER_BYTES = 8 * 1024
HEADER_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10.0
# A tunnel with no byte in either direction for this long is closed (the session's own
# lifetime bounds it too: the proxy container is removed with the session).
IDLE_TIMEOUT = 300.0
MAX_TUNNELS = 256
MAX_CONNECTIONS = 512  # tunnels plus connections still sending their request
CHUNK = 64 * 1024

REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def safe(text: str, limit: int = 80) -> str:
    """A client-supplied string made harmless for a log line."""
    cleaned = "".join(c if c.isprintable() and not c.isspace() else "?" for c in text)
    return cleaned[:limit] + ("..." if len(cleaned) > limit else "")


def log(peer: str, host: str, port: str, decision: str, reason: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = (
        f"{stamp} peer={safe(peer)} host={safe(host)} port={safe(port, 8)} "
        f"decision={decision} reason={reason}\n"
    )
    with contextlib.suppress(OSError):
        sys.stderr.write(line)
        sys.stderr.flush()


class Proxy:
    def __init__(
        self,
        pins: dict[str, tuple[str, ...]],
        allow_from: ipaddress.IPv4Network | ipaddress.IPv6Network | None,
    ) -> None:
        self.pins = pins
        self.allow_from = allow_from
        self.pin_later = False  # CORRAL_PIN_LATER: one `pin` op may set the pins
        self.tunnels = asyncio.Semaphore(MAX_TUNNELS)
        self.connections = 0
        self.open: dict[str, set[asyncio.StreamWriter]] = {}  # host -> its tunnels' writers

    def restrict(self, hosts: list[str]) -> list[str]:
        """Keep only `hosts` (of those pinned now) and close the tunnels of every other."""
        keep: set[str] = set()
        for host in hosts:
            with contextlib.suppress(ValueError, AttributeError):
                keep.add(normalise_host(host))
        keep &= set(self.pins)
        dropped = set(self.pins) - keep
        self.pins = {h: a for h, a in self.pins.items() if h in keep}
        for host in dropped:
            for writer in self.open.pop(host, set()):
                writer.close()
            log("-", host, "-", "drop", "removed_from_allowlist")
        return sorted(self.pins)

    def pin(self, raw: object) -> list[str]:
        """Set the pins of a proxy started without them (once; ValueError otherwise)."""
        if not self.pin_later or self.pins:
            raise ValueError("this proxy's pins are set already")
        self.pins = load_pins(json.dumps(raw))
        self.pin_later = False
        return sorted(self.pins)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer_info = writer.get_extra_info("peername")
        peer = str(peer_info[0]) if peer_info else "?"
        self.connections += 1
        try:
            if self.connections > MAX_CONNECTIONS:
                log(peer, "-", "-", "refuse", "too_many_connections")
                return  # closed without a word: the host is overloaded
            await self.serve(peer, reader, writer)
        except Exception as exc:  # one connection never takes the proxy down
            log(peer, "-", "-", "error", type(exc).__name__)
        finally:
            self.connections -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def serve(
        self, peer: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            head, rest = await asyncio.wait_for(read_head(reader), HEADER_TIMEOUT)
        except TimeoutError:
            log(peer, "-", "-", "refuse", "header_timeout")
            await reply(writer, 408)
            return
        except Refusal as refusal:
            if refusal.reason != "empty":  # a bare connect-and-close (a probe) decides nothing
                log(peer, "-", "-", "refuse", refusal.reason)
                await reply(writer, refusal.status)
            return
        try:
            if self.allow_from is not None and not peer_in(peer, self.allow_from):
                raise Refusal(403, "peer_not_allowed")
            host, port = parse_request(head)
            addrs = self.pins.get(host)
            if addrs is None:
                raise Refusal(403, "host_not_pinned", host=host, port=port)
        except Refusal as refusal:
            log(peer, refusal.host, refusal.port, "refuse", refusal.reason)
            await reply(writer, refusal.status)
            return
        if self.tunnels.locked():
            log(peer, host, port, "refuse", "too_many_tunnels")
            await reply(writer, 503)
            return
        async with self.tunnels:
            upstream = await connect_pinned(addrs)
            if upstream is None:
                log(peer, host, port, "refuse", "upstream_unreachable")
                await reply(writer, 502)
                return
            up_reader, up_writer, addr = upstream
            if host not in self.pins:  # dropped while connecting
                up_writer.close()
                log(peer, host, port, "refuse", "host_not_pinned")
                await reply(writer, 403)
                return
            log(peer, host, port, "allow", f"upstream={addr}")
            tunnel_ends = self.open.setdefault(host, set())
            tunnel_ends.update((writer, up_writer))
            try:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                if rest:
                    up_writer.write(rest)
                    await up_writer.drain()
                if await splice(reader, writer, up_reader, up_writer) == "idle":
                    log(peer, host, port, "close", "idle")
            finally:
                tunnel_ends.discard(writer)
                tunnel_ends.discard(up_writer)
                up_writer.close()
                with contextlib.suppress(Exception):
                    await up_writer.wait_closed()


def peer_in(peer: str, net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        addr = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr in net


async def read_head(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """Read up to the blank line; return (head, bytes already read after it)."""
    buf = b""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            if end > MAX_HEADER_BYTES:
                raise Refusal(400, "header_too_large")
            return buf[:end], buf[end + 4 :]
        if len(buf) > MAX_HEADER_BYTES:
            raise Refusal(400, "header_too_large")
        chunk = await reader.read(4096)
        if not chunk:
            raise Refusal(400, "empty" if not buf else "truncated")
        buf += chunk


async def reply(writer: asyncio.StreamWriter, status: int) -> None:
    body = f"{status} {REASONS[status]}\n".encode()
    head = (
        f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with contextlib.suppress(Exception):
        writer.write(head + body)
        await asyncio.wait_for(writer.drain(), 5)


async def connect_pinned(
    addrs: tuple[str, ...],
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str] | None:
    """Connect to the first pinned address that answers on 443. Addresses only: no DNS."""
    for addr in addrs:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(addr, UPSTREAM_PORT), CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError):
            continue
        return reader, writer, addr
    return None


async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, activity: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while True:
        data = await src.read(CHUNK)
        if not data:
            return
        activity[0] = loop.time()
        dst.write(data)
        await dst.drain()


async def splice(
    a_reader: asyncio.StreamReader,
    a_writer: asyncio.StreamWriter,
    b_reader: asyncio.StreamReader,
    b_writer: asyncio.StreamWriter,
) -> str:
    """Copy both ways; when either direction ends (close or error), or neither has moved
    a byte for IDLE_TIMEOUT seconds, end both. Returns "idle" or "closed"."""
    loop = asyncio.get_running_loop()
    activity = [loop.time()]
    tasks = [
        asyncio.ensure_future(pump(a_reader, b_writer, activity)),
        asyncio.ensure_future(pump(b_reader, a_writer, activity)),
    ]
    try:
        while True:
            remaining = IDLE_TIMEOUT - (loop.time() - activity[0])
            if remaining <= 0:
                return "idle"
            done, _ = await asyncio.wait(
                tasks, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            if done:
                return "closed"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def main() -> int:
    try:
        pins = load_pins(os.environ.get("CORRAL_PINS", "{}"))
        allow_raw = os.environ.get("CORRAL_ALLOW_FROM", "").strip()
        allow_from = ipaddress.ip_network(allow_raw, strict=False) if allow_raw else None
        port = int(os.environ.get("CORRAL_LISTEN_PORT", "3128"))
    except ValueError as exc:
        sys.stderr.write(f"corral-proxy: bad configuration: {exc}\n")
        return 2
    proxy = Proxy(pins, allow_from)
    proxy.pin_later = os.environ.get("CORRAL_PIN_LATER") == "1" and not pins
    server = await asyncio.start_server(proxy.handle, LISTEN_HOST, port, backlog=256)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stderr.write(
        f"corral-proxy: listening on {LISTEN_HOST}:{port}; pinned hosts: "
        f"{', '.join(sorted(pins)) or '(none)'}\n"
    )
    sys.stderr.flush()
    control = None
    if os.environ.get("CORRAL_CONTROL") == "stdin":
        control = asyncio.ensure_future(serve_control(proxy, stop))
    async with server:
        await stop.wait()
    if control is not None:
        control.cancel()
    return 0


async def serve_control(proxy: Proxy, stop: asyncio.Event) -> None:
    """Answer control lines from stdin (see CORRAL_CONTROL); end of stdin stops the proxy
    (the gateway that attached to it is gone)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        answer = control_answer(proxy, line)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    stop.set()


def control_answer(proxy: Proxy, line: bytes) -> dict[str, object]:
    try:
        request = json.loads(line)
        ident = request.get("id")
    except (ValueError, AttributeError, TypeError):
        return {"id": None, "ok": False, "error": "not a JSON object"}
    op = request.get("op")
    if op == "restrict" and isinstance(request.get("hosts"), list):
        return {"id": ident, "ok": True, "hosts": proxy.restrict(request["hosts"])}
    if op == "pin" and isinstance(request.get("pins"), dict):
        try:
            return {"id": ident, "ok": True, "hosts": proxy.pin(request["pins"])}
        except ValueError as exc:
            log("-", "-", "-", "refuse", "pin_refused")
            return {"id": ident, "ok": False, "error": str(exc)}
    return {"id": ident, "ok": False, "error": "unknown request"}


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
