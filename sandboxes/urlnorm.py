"""URLs normalised for comparison (SPEC S2.4 deny list), pure.

Raw text is not compared: `https://bank.example//pay`, `https://BANK.example:443/pay`,
`https://bank.example/%70ay`, `https://bank.example/x/../pay` and an IDNA or
trailing-dot host all name the same page. `normalise` reduces a URL to (host, path)
after RFC 3986 normalisation: scheme and host lower-cased, the host in IDNA (ASCII)
form without a trailing dot, the port dropped (a deny entry covers every port),
percent-escapes of unreserved characters decoded and the others upper-cased, dot
segments removed and repeated slashes collapsed.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _unescape_unreserved(path: str) -> str:
    def one(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    return _ESCAPE.sub(one, path)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, on a path whose repeated slashes are already collapsed."""
    out: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == ".":
            continue
        if segment == "..":
            if out:
                out.pop()
            continue
        out.append(segment)
    trailing = path.endswith(("/.", "/..")) and out != []
    return "/" + "/".join(out) + ("/" if trailing else "")


def normalise_host_text(host: str) -> str | None:
    host = host.strip().rstrip(".").lower()
    if not host:
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host


def normalise(url: str) -> tuple[str, str] | None:
    """(host, path) of an http(s) URL after normalisation, or None for anything else."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    canonical_host = normalise_host_text(host)
    if canonical_host is None:
        return None
    path = _unescape_unreserved(parts.path or "/")
    path = re.sub(r"/{2,}", "/", path if path.startswith("/") else "/" + path)
    return canonical_host, _remove_dot_segments(path)


def host_covers(entry_host: str, host: str) -> bool:
    """An entry host covers itself and its subdomains."""
    return host == entry_host or host.endswith("." + entry_host)
