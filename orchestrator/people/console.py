"""The operator console (SPEC S6.2), served by the gateway at /console on its own port.

Login by operator token (`POST /console/login`, form field `token`), then an HttpOnly,
SameSite=Strict cookie naming a login held in the gateway's memory. Every POST needs
the login's CSRF token (form field `csrf` or header `X-CSRF-Token`; the login form uses a
double-submit cookie). Every answer carries a Content-Security-Policy without inline
scripts, `X-Frame-Options: DENY` and `Cache-Control: no-store`. The live view is noVNC
over a WebSocket (`/console/sessions/AGENT/vnc`) that needs the cookie and a same-origin
`Origin`; the gateway bridges it to the kiosk's VNC server through the container (no
TCP port is published). Logins end when their operator is removed. A login is bound to
the local user (uid) whose browser logged in (orchestrator.people.peer): its cookie, which
the browser also sends to other loopback ports, is refused from another user's process.
"""

from __future__ import annotations

import hmac
import itertools
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from orchestrator.errors import ApprovalError, OperatorError, SeatError
from orchestrator.home import CorralHome
from orchestrator.people import console_pages as pages
from orchestrator.people.operators import list_operators, operator_for_token
from orchestrator.people.peer import peer_uid
from orchestrator.people.seats import SeatBoard
from sandboxes.rfb import ClientMessage

LiveBridge = Callable[[WebSocket, str, Callable[[ClientMessage], Awaitable[bool]]], Awaitable[None]]
"""(the accepted-or-not WebSocket, the agent, the input decider): bridges the live view."""

COOKIE = "corral_console"
LOGIN_CSRF_COOKIE = "corral_login_csrf"
LOGIN_TTL_SECONDS = 12 * 3600
MAX_FORM_BYTES = 8 * 1024
STATIC_DIR = Path(__file__).resolve().parent / "console_static"
NOVNC_DIR = (
    Path(__file__).resolve().parents[2] / ".cache" / "novnc" / "node_modules" / "@novnc" / "novnc"
)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
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

    def __init__(self, home: CorralHome, clock: Callable[[], float] = time.time) -> None:
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


async def _form(request: Request) -> dict[str, str] | None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        return None
    form = await request.form(max_files=0, max_fields=20)
    return {k: v for k, v in form.items() if isinstance(v, str)}


class StaticSecured(StaticFiles):
    """Static files with the console's headers (cacheable: they hold no state)."""

    async def get_response(self, path: str, scope: Any) -> Response:
        return secured(await super().get_response(path, scope), cache=True)


def console_routes(
    home: CorralHome,
    oversight: SeatBoard,
    *,
    novnc_dir: Path = NOVNC_DIR,
    bridge: LiveBridge | None = None,
) -> list[BaseRoute]:
    logins = Logins(home)
    viewers = itertools.count(1)

    def login_of(request: Request | WebSocket) -> tuple[str | None, Login | None]:
        login_id = request.cookies.get(COOKIE)
        return login_id, logins.get(login_id, peer_uid(request.scope))

    def csrf_ok(request: Request, login: Login, form: dict[str, str] | None) -> bool:
        sent = request.headers.get("x-csrf-token") or (form or {}).get("csrf", "")
        return bool(sent) and hmac.compare_digest(sent, login.csrf)

    def page(html: str, status: int = 200) -> Response:
        return secured(Response(html, status_code=status, media_type="text/html"))

    def to_login() -> Response:
        return secured(RedirectResponse("/console/login", status_code=303))

    async def login_page(request: Request) -> Response:
        token = secrets.token_urlsafe(24)
        response = page(pages.login_page(token, request.query_params.get("failed") == "1"))
        response.set_cookie(
            LOGIN_CSRF_COOKIE, token, httponly=True, samesite="strict", path="/console/login"
        )
        return response

    async def login(request: Request) -> Response:
        form = await _form(request)
        cookie = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        if form is None or not cookie or not hmac.compare_digest(form.get("csrf", ""), cookie):
            return page(pages.message_page("Refused", "The login form expired; reload it."), 403)
        try:
            operator = operator_for_token(home, form.get("token", "").strip())
        except OperatorError:
            operator = None
        if operator is None:
            oversight.audit.record("console_login_refused", None, {"why": "unknown token"})
            return secured(RedirectResponse("/console/login?failed=1", status_code=303))
        login_id, _ = logins.create(operator, peer_uid(request.scope))
        oversight.audit.record("console_login", None, {"operator": operator})
        response = secured(RedirectResponse("/console/", status_code=303))
        response.set_cookie(
            COOKIE,
            login_id,
            httponly=True,
            samesite="strict",
            path="/console",
            max_age=LOGIN_TTL_SECONDS,
        )
        response.delete_cookie(LOGIN_CSRF_COOKIE, path="/console/login")
        return response

    async def logout(request: Request) -> Response:
        login_id, login = login_of(request)
        if login is None:
            return to_login()
        if not csrf_ok(request, login, await _form(request)):
            return page(pages.message_page("Refused", "Missing or wrong CSRF token."), 403)
        logins.end(login_id)
        response = to_login()
        response.delete_cookie(COOKIE, path="/console")
        return response

    async def home_page(request: Request) -> Response:
        _, login = login_of(request)
        if login is None:
            return to_login()
        return page(pages.sessions_page(login.operator, login.csrf, oversight.sessions_view()))

    async def session_page(request: Request) -> Response:
        _, login = login_of(request)
        if login is None:
            return to_login()
        agent = request.path_params["agent"]
        if agent not in oversight.seats():
            return page(pages.message_page("No session", f"{agent} has no running session."), 404)
        return page(pages.session_page(login.operator, login.csrf, agent))

    async def state(request: Request) -> Response:
        _, login = login_of(request)
        if login is None:
            return secured(JSONResponse({"error": "log in first"}, status_code=401))
        agent = request.query_params.get("agent")
        data: dict[str, Any] = {
            "operator": login.operator,
            "sessions": oversight.sessions_view(),
            "approvals": [a.public() for a in oversight.approvals.recent()[:50]],
        }
        session = oversight.seats().get(agent or "")
        if session is not None:
            data["timeline"] = [e.public() for e in reversed(session.timeline)]
            data["session"] = next((s for s in data["sessions"] if s["agent"] == agent), None)
        return secured(JSONResponse(data))

    async def approval_png(request: Request) -> Response:
        _, login = login_of(request)
        if login is None:
            return secured(Response(status_code=401))
        approval = oversight.approvals.get(request.path_params["approval"])
        if approval is None or approval.screenshot_png is None:
            return secured(Response(status_code=404))
        return secured(Response(approval.screenshot_png, media_type="image/png"))

    async def thumb_png(request: Request) -> Response:
        _, login = login_of(request)
        if login is None:
            return secured(Response(status_code=401))
        session = oversight.seats().get(request.path_params["agent"])
        seq = int(request.path_params["seq"])
        entry = next((e for e in session.timeline if e.seq == seq), None) if session else None
        if entry is None or entry.thumb is None:
            return secured(Response(status_code=404))
        return secured(Response(entry.thumb, media_type="image/png"))

    async def act(request: Request) -> Response:
        _, login = login_of(request)
        if login is None:
            return secured(JSONResponse({"error": "log in first"}, status_code=401))
        form = await _form(request)
        if not csrf_ok(request, login, form):
            return secured(JSONResponse({"error": "missing or wrong CSRF token"}, 403))
        what, target = request.path_params["what"], request.path_params["target"]
        try:
            if what in ("approve", "deny"):
                reason = (form or {}).get("reason", "")
                oversight.approvals.decide(target, login.operator, what == "approve", reason)
            elif what == "takeover":
                oversight.take_over(target, login.operator, viewer=None, how="console")
            elif what == "handback":
                oversight.hand_back(target, login.operator)
            elif what == "stop":
                await oversight.stop(target, login.operator)
            else:
                return secured(JSONResponse({"error": f"unknown action {what}"}, 404))
        except (ApprovalError, SeatError) as exc:
            return secured(JSONResponse({"error": str(exc)}, status_code=409))
        if "application/json" in request.headers.get("accept", ""):
            return secured(JSONResponse({"ok": True}))
        back = request.headers.get("referer") or "/console/"
        return secured(RedirectResponse(back if back.startswith("/console") else "/console/", 303))

    async def vnc(websocket: WebSocket) -> None:
        _, login = login_of(websocket)
        agent = websocket.path_params["agent"]
        origin_ok = same_origin(websocket.headers.get("origin"), websocket.headers.get("host"))
        if login is None or not origin_ok or agent not in oversight.seats():
            why = (
                "no login" if login is None else "foreign origin" if not origin_ok else "no session"
            )
            oversight.audit.record("console_vnc_refused", agent, {"why": why})
            await websocket.close(code=1008)
            return
        if bridge is None:
            await websocket.close(code=1011)
            return
        viewer = f"v{next(viewers)}"
        operator = login.operator

        async def on_input(message: ClientMessage) -> bool:
            if logins.get(websocket.cookies.get(COOKIE), peer_uid(websocket.scope)) is None:
                return False  # logged out or removed meanwhile: view only
            # Moving the mouse over the live view (a PointerEvent with no button) is not
            # taking the desktop: it is forwarded only to the viewer who holds the seat.
            hover = message.name == "PointerEvent" and not message.buttons
            try:
                return oversight.viewer_input(agent, operator, viewer, take=not hover)
            except SeatError:
                return False

        try:
            await bridge(websocket, agent, on_input)
        finally:
            oversight.viewer_left(agent, viewer)

    routes: list[BaseRoute] = [
        Route("/console", lambda r: secured(RedirectResponse("/console/", 307))),
        Route("/console/", home_page, methods=["GET"]),
        Route("/console/login", login_page, methods=["GET"]),
        Route("/console/login", login, methods=["POST"]),
        Route("/console/logout", logout, methods=["POST"]),
        Route("/console/api/state", state, methods=["GET"]),
        Route("/console/sessions/{agent}", session_page, methods=["GET"]),
        Route("/console/approvals/{approval}/screenshot.png", approval_png, methods=["GET"]),
        Route("/console/sessions/{agent}/timeline/{seq:int}.png", thumb_png, methods=["GET"]),
        Route("/console/act/{what}/{target}", act, methods=["POST"]),
        WebSocketRoute("/console/sessions/{agent}/vnc", vnc),
        Mount("/console/static", app=StaticSecured(directory=STATIC_DIR), name="static"),
    ]
    if novnc_dir.is_dir():
        routes.append(Mount("/console/novnc", app=StaticSecured(directory=novnc_dir)))
    return routes
