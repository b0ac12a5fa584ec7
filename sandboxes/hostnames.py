"""Host-name policy (SPEC S2.6), pure: the canonical form of an allowlisted host, and
which resolved addresses may be pinned. Shared by config validation, the egress
set-up and the URL check; the proxy image applies the same rules on its own (it
cannot import corral, and a second check inside the trust boundary is wanted)."""

from __future__ import annotations

import contextlib
import ipaddress
import re

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
HOST_NAME_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")


def normalise_host(raw: str) -> str:
    """An allowlist entry in canonical form: a lower-case DNS name without a trailing dot,
    or an IP literal. The proxy applies the same rules to what clients ask for."""
    host = raw.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        return str(ipaddress.IPv6Address(host[1:-1]))
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(host))
    if len(host) > 253 or not HOST_NAME_RE.match(host):
        raise ValueError(f"not a host name: {raw!r}")
    if host.rsplit(".", 1)[-1].isdigit():  # "010.1.2.3": inet_aton would read it as 8.1.2.3
        raise ValueError(f"not a host name nor an IP address: {raw!r}")
    return host


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def usable_address(addr: str, *, allow_private: bool) -> bool:
    """Whether a resolved address may be pinned. Loopback, private, link-local and other
    non-global addresses would turn an allowlisted name with hostile DNS into a way into
    this host or its network, so they need `allow_private` (or an explicit override)."""
    ip = ipaddress.ip_address(addr)
    if ip.is_unspecified or ip.is_multicast:
        return False
    return allow_private or ip.is_global
