"""What a client of corral-proxy may ask for (proxy.py): host names and IP literals in
canonical form, the pins (the only hosts and the only addresses), and the one request
accepted, `CONNECT host:443`. Standard library only; copied into the proxy image beside
proxy.py, which imports it. A host's canonical form is corral's own rule,
`sandboxes/hostnames.py`, which the image's build context carries under its own path
(SHARED_CONTEXT in orchestrator/backends/docker/images.py): one rule, applied again
inside the proxy's trust boundary."""

from __future__ import annotations

import ipaddress
import json
import re

from sandboxes.hostnames import normalise_host

UPSTREAM_PORT = 443
MAX_ADDRS_PER_HOST = 16

TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


class Refusal(Exception):
    def __init__(self, status: int, reason: str, host: str = "-", port: str = "-") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.host = host
        self.port = port


def load_pins(text: str) -> dict[str, tuple[str, ...]]:
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("CORRAL_PINS must be a JSON object")
    pins: dict[str, tuple[str, ...]] = {}
    for host, addrs in raw.items():
        if not isinstance(host, str) or not isinstance(addrs, list) or not addrs:
            raise ValueError(f"bad pin entry for {host!r}")
        if len(addrs) > MAX_ADDRS_PER_HOST:
            raise ValueError(f"too many addresses for {host!r}")
        canonical = []
        for addr in addrs:
            if not isinstance(addr, str):
                raise ValueError(f"bad address for {host!r}")
            canonical.append(str(ipaddress.ip_address(addr)))  # never a name
        pins[normalise_host(host)] = tuple(canonical)
    return pins


def parse_request(head: bytes) -> tuple[str, str]:
    """Validate the request head; return (host, port) of an acceptable CONNECT.

    `head` is everything up to and excluding the blank line. Raises Refusal.
    """
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise Refusal(400, "non_ascii") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not TOKEN_RE.match(parts[0]):
        raise Refusal(400, "bad_request_line")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise Refusal(400, "bad_version")
    for line in lines[1:]:
        name, sep, _ = line.partition(":")
        if not sep or not TOKEN_RE.match(name):
            raise Refusal(400, "bad_header")
    if method != "CONNECT":
        host = target.split("//", 1)[-1].split("/", 1)[0]
        raise Refusal(403, "method_not_allowed", host=host, port="-")
    host_part, sep, port = target.rpartition(":")
    if not sep or not host_part:
        raise Refusal(400, "bad_authority", host=target)
    if port != str(UPSTREAM_PORT):
        raise Refusal(403, "port_not_allowed", host=host_part, port=port)
    try:
        host = normalise_host(host_part)
    except ValueError:
        raise Refusal(403, "bad_host", host=host_part, port=port) from None
    return host, port
