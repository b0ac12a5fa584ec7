"""Which local user is on the other end of a loopback TCP connection (Linux).

A browser sends a host's cookies to every port of that host, so a server another local
user runs on another loopback port (127.0.0.1:8080) receives the console's login cookie
whenever the operator's browser visits it. The console therefore binds each login to
the uid that logged in: the kernel knows which user owns the client's socket
(/proc/net/tcp and tcp6, the `uid` column of the row whose local address is the
client's and remote address the server's), so a stolen cookie replayed from another
user's process is refused. Where that table cannot be read (not Linux, another network
namespace), the uid is unknown (None) and the login is not bound.

The other way round, `listener_uid` names the user whose socket listens on an address:
the CLI checks it before it sends an operator's token there, so a server another user
started on the gateway's port (while the gateway is down) never receives the token.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_LISTEN = "0A"


def _hex_address(host: str, port: int) -> str:
    """An address as /proc/net/tcp{,6} prints it: the IP in 32-bit words of host byte
    order (little-endian here), then the port, in upper-case hex."""
    packed = ipaddress.ip_address(host).packed
    words = (packed[i : i + 4][::-1] for i in range(0, len(packed), 4))
    return "".join(word.hex() for word in words).upper() + f":{port:04X}"


def _candidates(host: str, port: int) -> set[str]:
    """The forms a socket may take: IPv4 in tcp, IPv6 (and v4-mapped IPv6) in tcp6."""
    address = ipaddress.ip_address(host)
    forms = {_hex_address(host, port)}
    if isinstance(address, ipaddress.IPv4Address):
        forms.add(_hex_address(f"::ffff:{host}", port))
    elif address.ipv4_mapped is not None:
        forms.add(_hex_address(str(address.ipv4_mapped), port))
    return forms


def uid_of_rows(
    rows: Iterable[str], client: tuple[str, int], server: tuple[str, int]
) -> int | None:
    """The uid of the row for the socket at `client` connected to `server`, or None."""
    mine, theirs = _candidates(*client), _candidates(*server)
    for row in rows:
        fields = row.split()
        if len(fields) > 7 and fields[1] in mine and fields[2] in theirs:
            return int(fields[7]) if fields[7].isdigit() else None
    return None


def peer_uid(scope: Mapping[str, Any], tables: Iterable[Path] = TABLES) -> int | None:
    """The uid owning the client's socket of this ASGI connection, or None if unknown."""
    client, server = scope.get("client"), scope.get("server")
    if not client or not server:
        return None
    try:
        ends = ((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
        return uid_of_rows(_rows(tables), *ends)
    except (ValueError, TypeError):
        return None


def _rows(tables: Iterable[Path]) -> Iterable[str]:
    for table in tables:
        try:
            yield from table.read_text(encoding="ascii", errors="replace").splitlines()[1:]
        except OSError:
            continue


def listener_uid(host: str, port: int, tables: Iterable[Path] = TABLES) -> int | None:
    """The uid whose socket listens on `host`:`port` (or on every address at that port),
    or None if none is seen (no listener, or the tables cannot be read)."""
    try:
        wanted = _candidates(host, port) | _candidates("0.0.0.0", port) | _candidates("::", port)
    except ValueError:  # a host name, not an address: nothing to match
        return None
    for row in _rows(tables):
        fields = row.split()
        if len(fields) > 7 and fields[3] == _LISTEN and fields[1] in wanted:
            return int(fields[7]) if fields[7].isdigit() else None
    return None
