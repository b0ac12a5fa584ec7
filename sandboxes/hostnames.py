"""Host-name policy (SPEC S2.6), pure: the canonical form of an allowlisted host, and
which resolved addresses may be pinned. Shared by config validation, the egress
set-up and the URL check. The proxy image carries this very file (its build context
takes it) and applies it again inside its trust boundary, so this module stays standard
library only."""

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


def address_class(addr: str) -> str | None:
    """None for a public address; otherwise what it is (loopback, private, ...).

    Only public addresses may be pinned for a name found through DNS: a loopback,
    private, link-local or other non-public answer would turn an allowlisted name with
    hostile DNS into a way into this host or its network. A name the operator maps
    in `resolve_overrides` is the one exception (it is used as written)."""
    ip = ipaddress.ip_address(addr)
    if ip.is_global and not ip.is_multicast:
        return None
    for kind, test in (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
    ):
        if test:
            return kind
    return "not public"


def usable_address(addr: str) -> bool:
    """Whether an address found through DNS (or an allowlisted IP literal) may be pinned."""
    return address_class(addr) is None


def host_entry_problem(entry: str) -> str | None:
    """What is wrong with a host name written in config (`allowed_domains`, a
    `resolve_overrides` key, a deny-list host), or None when it is in canonical form:
    lower-case ASCII (IDNA for international names), no trailing dot, no whitespace, no
    scheme, port or path, no wildcard (corral has no wildcard syntax: list each name).
    The problem says how to write the entry instead, where there is one way."""
    if entry != entry.strip() or any(ch.isspace() for ch in entry):
        return "must not contain whitespace"
    if not entry:
        return "must not be empty"
    if "*" in entry:
        return "wildcards are not supported: list each host name (subdomains are not implied)"
    if "/" in entry or "@" in entry:
        return "must be a host name only, without scheme, user, port or path"
    if is_ip_literal(entry):
        canonical = str(ipaddress.ip_address(entry))
        return None if canonical == entry else f"write the address as {canonical!r}"
    if ":" in entry:
        return "must be a host name only, without a port (only 443 is ever used)"
    if entry.endswith("."):
        return f"drop the trailing dot: write {entry.rstrip('.')!r}"
    if not entry.isascii():
        try:
            ascii_form = entry.encode("idna").decode("ascii")
        except UnicodeError:
            return "is not a valid international host name"
        return f"write international names in their IDNA form: {ascii_form!r}"
    if entry != entry.lower():
        return f"write it in lower case: {entry.lower()!r}"
    try:
        normalise_host(entry)
    except ValueError:
        return (
            "is not a host name: labels of letters, digits and '-' (not at either end), "
            "separated by dots, at most 253 characters"
        )
    return None


def deny_entry_problem(entry: str) -> str | None:
    """What is wrong with a deny-list entry: a host name (see `host_entry_problem`), or a
    URL prefix `https://host/path...` whose host is written the same way."""
    if "://" not in entry:
        return host_entry_problem(entry)
    if any(ch.isspace() for ch in entry):
        return "must not contain whitespace"
    scheme, _, rest = entry.partition("://")
    if scheme not in ("https", "http"):
        return f"a URL prefix must start with https:// or http://, not {scheme}://"
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    problem = host_entry_problem(host)
    return None if problem is None else f"the URL's host {host!r}: {problem}"
