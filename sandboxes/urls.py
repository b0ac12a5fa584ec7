"""computer_navigate's URL policy (SPEC S2.6), pure.

https only; the host exactly in the agent's allowed_domains AND pinned at
session start; port absent or 443; no user name or password; at most 2000
bytes. The network enforces the same thing independently (the proxy only
tunnels to pinned hosts on 443); this check gives the agent a clear message.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

URL_MAX_BYTES = 2000


@dataclass(frozen=True, slots=True)
class UrlVerdict:
    allowed: bool
    message: str = ""
    host: str = ""


def check_url_size(url: str) -> None:
    """A URL parameter's size bound (its UTF-8 bytes), as the models' validation error."""
    size = len(url.encode())
    if size > URL_MAX_BYTES:
        raise ValueError(f"url: at most {URL_MAX_BYTES} bytes (got {size})")


def _refuse(message: str) -> UrlVerdict:
    return UrlVerdict(False, f"navigation refused: {message}")


def check_url(url: str, allowed: Collection[str], pinned: Collection[str]) -> UrlVerdict:
    """Whether a session whose allowlist is `allowed` (pinned at start: `pinned`) may open
    `url`."""
    size = len(url.encode())
    if size > URL_MAX_BYTES:
        return _refuse(f"the URL is {size} bytes; at most {URL_MAX_BYTES} bytes are allowed")
    if not allowed:
        return _refuse(
            "this session has no network ([capabilities.computer_use_config] allowed_domains "
            "is empty)"
        )
    if any(ch.isspace() or ord(ch) < 0x20 or ch == "\\" for ch in url):
        return _refuse("the URL contains spaces, control characters or backslashes")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return _refuse("the URL's port is not a number from 1 to 65535")
    if parts.scheme.lower() != "https":
        return _refuse(f"only https:// URLs can be opened (got {parts.scheme or 'no'} scheme)")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return _refuse("URLs with a user name or password are refused")
    if port is not None and port != 443:
        return _refuse(f"only port 443 is allowed (got {port})")
    host = (parts.hostname or "").lower()
    if not host:
        return _refuse("the URL has no host")
    allowed_lower = {h.lower() for h in allowed}
    if host not in allowed_lower:
        return _refuse(
            f"host {host!r} is not in this agent's allowed_domains "
            f"({', '.join(sorted(allowed_lower))})"
        )
    if host not in {h.lower() for h in pinned}:
        return _refuse(
            f"host {host!r} was not resolved when the session started; stop and start the "
            "session to use a changed allowlist"
        )
    return UrlVerdict(True, host=host)
