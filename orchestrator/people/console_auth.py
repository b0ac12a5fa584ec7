"""Who is logged in to the console, and what every console answer carries.

A login is held in the gateway's memory and named by an HttpOnly, SameSite=Strict cookie
(`COOKIE`); it ends after `LOGIN_TTL_SECONDS`, at logout, or when its operator is
removed. Every answer gets `SECURITY_HEADERS` (a Content-Security-Policy without inline
scripts, no framing) and, unless it is a static file, `Cache-Control: no-store`."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from orchestrator.errors import OperatorError
from orchestrator.home import CorralHome
from orchestrator.people.clock import steady_wall
from orchestrator.people.operators import list_operators

COOKIE = "corral_console"
LOGIN_CSRF_COOKIE = "corral_login_csrf"
LOGIN_TTL_SECONDS = 12 * 3600
MAX_FORM_BYTES = 8 * 1024

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self'; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass
class Login:
    operator: str
    csrf: str
    expires: float
    uid: int | None = None  # the local user whose connection logged in (None: unknown)


class Logins:
    """Console logins in the gateway's memory (a gateway restart logs everyone out)."""

    def __init__(self, home: CorralHome, clock: Callable[[], float] = steady_wall) -> None:
        self.home = home
        self.clock = clock
        self._by_id: dict[str, Login] = {}

    def create(self, operator: str, uid: int | None = None) -> tuple[str, Login]:
        self._prune()
        login_id = secrets.token_urlsafe(32)
        csrf, expires = secrets.token_urlsafe(24), self.clock() + LOGIN_TTL_SECONDS
        login = Login(operator, csrf, expires, uid)
        self._by_id[login_id] = login
        return login_id, login

    def get(self, login_id: str | None, uid: int | None = None) -> Login | None:
        """The login, if live and its operator still exists; None for another local user
        (`uid` not the one that logged in) without ending it (that was not its owner)."""
        if not login_id:
            return None
        login = self._by_id.get(login_id)
        if login is None or login.expires < self.clock():
            self._by_id.pop(login_id, None)
            return None
        if login.uid is not None and uid != login.uid:
            return None
        try:
            names = {op.name for op in list_operators(self.home)}
        except OperatorError:
            names = set()
        if login.operator not in names:  # removed since: the login ends now
            self._by_id.pop(login_id, None)
            return None
        return login

    def end(self, login_id: str | None) -> None:
        if login_id:
            self._by_id.pop(login_id, None)

    def _prune(self) -> None:
        now = self.clock()
        for key in [k for k, v in self._by_id.items() if v.expires < now]:
            del self._by_id[key]


def secured(response: Response, *, cache: bool = False) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    if not cache:
        response.headers["Cache-Control"] = "no-store"
    return response


def same_origin(origin: str | None, host: str | None) -> bool:
    """Whether an Origin header names this very server (scheme http, the Host header)."""
    return bool(origin and host) and origin == f"http://{host}"


async def read_form(request: Request) -> dict[str, str] | None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        return None
    form = await request.form(max_files=0, max_fields=20)
    return {k: v for k, v in form.items() if isinstance(v, str)}
