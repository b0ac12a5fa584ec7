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

The routes come in groups, one function each: login, pages and the state they poll,
images, actions, the live view. Every route behind a login is one handler given the
login, wrapped by `_Console.logged_in` with what to answer without one. The logins and
the headers live in `console_auth`.
"""

from __future__ import annotations

import hmac
import itertools
import secrets
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
from orchestrator.people.console_auth import (
    COOKIE,
    LOGIN_CSRF_COOKIE,
    LOGIN_TTL_SECONDS,
    Login,
    Logins,
    read_form,
    same_origin,
    secured,
)
from orchestrator.people.console_recordings import recording_routes
from orchestrator.people.operators import operator_for_token
from orchestrator.people.peer import peer_uid
from orchestrator.people.seats import SeatBoard
from orchestrator.recordings.store import RecordingStore
from sandboxes.rfb import ClientMessage

LiveBridge = Callable[[WebSocket, str, Callable[[ClientMessage], Awaitable[bool]]], Awaitable[None]]
"""(the accepted-or-not WebSocket, the agent, the input decider): bridges the live view."""

STATIC_DIR = Path(__file__).resolve().parent / "console_static"
NOVNC_DIR = (
    Path(__file__).resolve().parents[2] / ".cache" / "novnc" / "node_modules" / "@novnc" / "novnc"
)


class StaticSecured(StaticFiles):
    """Static files with the console's headers (cacheable: they hold no state)."""

    async def get_response(self, path: str, scope: Any) -> Response:
        return secured(await super().get_response(path, scope), cache=True)


Endpoint = Callable[[Request], Awaitable[Response]]
LoggedIn = Callable[[Request, Login], Awaitable[Response]]
"""A handler that runs only for a request with a live login, and is given it."""


@dataclass(eq=False)
class _Console:
    """What every route group shares: the logins, the seats, and how to answer."""

    home: CorralHome
    oversight: SeatBoard
    logins: Logins

    def login_of(self, request: Request | WebSocket) -> Login | None:
        return self.logins.get(request.cookies.get(COOKIE), peer_uid(request.scope))

    def logged_in(self, handler: LoggedIn, refused: Callable[[], Response]) -> Endpoint:
        """`handler` for a request with a live login; `refused()` for one without."""

        async def endpoint(request: Request) -> Response:
            login = self.login_of(request)
            return refused() if login is None else await handler(request, login)

        return endpoint

    @staticmethod
    def csrf_ok(request: Request, login: Login, form: dict[str, str] | None) -> bool:
        sent = request.headers.get("x-csrf-token") or (form or {}).get("csrf", "")
        return bool(sent) and hmac.compare_digest(sent, login.csrf)


def _page(html: str, status: int = 200) -> Response:
    return secured(Response(html, status_code=status, media_type="text/html"))


def _to_login() -> Response:
    return secured(RedirectResponse("/console/login", status_code=303))


def _json_401() -> Response:
    return secured(JSONResponse({"error": "log in first"}, status_code=401))


def _bare_401() -> Response:
    return secured(Response(status_code=401))


def console_routes(
    home: CorralHome,
    oversight: SeatBoard,
    *,
    novnc_dir: Path = NOVNC_DIR,
    bridge: LiveBridge | None = None,
) -> list[BaseRoute]:
    console = _Console(home, oversight, Logins(home))
    routes: list[BaseRoute] = [
        Route("/console", lambda r: secured(RedirectResponse("/console/", 307))),
        *_login_routes(console),
        *_page_routes(console),
        *_image_routes(console),
        *_action_routes(console),
        *_live_routes(console, bridge),
        *recording_routes(
            RecordingStore(home.recordings_dir), console.logged_in, _to_login, _bare_401
        ),
        Mount("/console/static", app=StaticSecured(directory=STATIC_DIR), name="static"),
    ]
    if novnc_dir.is_dir():
        routes.append(Mount("/console/novnc", app=StaticSecured(directory=novnc_dir)))
    return routes


def _login_routes(c: _Console) -> list[BaseRoute]:
    """The login form, logging in by operator token, and logging out."""

    async def login_page(request: Request) -> Response:
        token = secrets.token_urlsafe(24)
        response = _page(pages.login_page(token, request.query_params.get("failed") == "1"))
        response.set_cookie(
            LOGIN_CSRF_COOKIE, token, httponly=True, samesite="strict", path="/console/login"
        )
        return response

    async def login(request: Request) -> Response:
        form = await read_form(request)
        cookie = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        if form is None or not cookie or not hmac.compare_digest(form.get("csrf", ""), cookie):
            return _page(pages.message_page("Refused", "The login form expired; reload it."), 403)
        try:
            operator = operator_for_token(c.home, form.get("token", "").strip())
        except OperatorError:
            operator = None
        if operator is None:
            c.oversight.audit.record("console_login_refused", None, {"why": "unknown token"})
            return secured(RedirectResponse("/console/login?failed=1", status_code=303))
        login_id, _ = c.logins.create(operator, peer_uid(request.scope))
        c.oversight.audit.record("console_login", None, {"operator": operator})
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

    async def logout(request: Request, login: Login) -> Response:
        if not c.csrf_ok(request, login, await read_form(request)):
            return _page(pages.message_page("Refused", "Missing or wrong CSRF token."), 403)
        c.logins.end(request.cookies.get(COOKIE))
        response = _to_login()
        response.delete_cookie(COOKIE, path="/console")
        return response

    return [
        Route("/console/login", login_page, methods=["GET"]),
        Route("/console/login", login, methods=["POST"]),
        Route("/console/logout", c.logged_in(logout, _to_login), methods=["POST"]),
    ]


def _page_routes(c: _Console) -> list[BaseRoute]:
    """The sessions page, one session's page, and the state both poll."""
    board = c.oversight

    async def home_page(request: Request, login: Login) -> Response:
        return _page(pages.sessions_page(login.operator, login.csrf, board.sessions_view()))

    async def session_page(request: Request, login: Login) -> Response:
        agent = request.path_params["agent"]
        if agent not in board.seats():
            return _page(pages.message_page("No session", f"{agent} has no running session."), 404)
        return _page(pages.session_page(login.operator, login.csrf, agent))

    async def state(request: Request, login: Login) -> Response:
        agent = request.query_params.get("agent")
        data: dict[str, Any] = {
            "operator": login.operator,
            "sessions": board.sessions_view(),
            "approvals": [a.public() for a in board.approvals.recent()[:50]],
        }
        session = board.seats().get(agent or "")
        if session is not None:
            data["timeline"] = [e.public() for e in reversed(session.timeline)]
            recorder = session.recorder
            data["recording"] = (
                None
                if recorder is None
                else {
                    "id": recorder.meta.id,
                    "started_at": recorder.meta.started_at,
                    "stopped": recorder.stopped,
                }
            )
            data["session"] = next((s for s in data["sessions"] if s["agent"] == agent), None)
        return secured(JSONResponse(data))

    return [
        Route("/console/", c.logged_in(home_page, _to_login), methods=["GET"]),
        Route("/console/api/state", c.logged_in(state, _json_401), methods=["GET"]),
        Route("/console/sessions/{agent}", c.logged_in(session_page, _to_login), methods=["GET"]),
    ]


def _image_routes(c: _Console) -> list[BaseRoute]:
    """An approval's masked screenshot and a timeline entry's thumbnail."""

    async def approval_png(request: Request, login: Login) -> Response:
        approval = c.oversight.approvals.get(request.path_params["approval"])
        png = approval.screenshot_png if approval is not None else None
        return _png(png)

    async def thumb_png(request: Request, login: Login) -> Response:
        session = c.oversight.seats().get(request.path_params["agent"])
        seq = int(request.path_params["seq"])
        entry = next((e for e in session.timeline if e.seq == seq), None) if session else None
        return _png(entry.thumb if entry is not None else None)

    return [
        Route(
            "/console/approvals/{approval}/screenshot.png",
            c.logged_in(approval_png, _bare_401),
            methods=["GET"],
        ),
        Route(
            "/console/sessions/{agent}/timeline/{seq:int}.png",
            c.logged_in(thumb_png, _bare_401),
            methods=["GET"],
        ),
    ]


def _png(png: bytes | None) -> Response:
    if png is None:
        return secured(Response(status_code=404))
    return secured(Response(png, media_type="image/png"))


def _action_routes(c: _Console) -> list[BaseRoute]:
    """An operator's decision on an approval, and take over, hand back or stop a seat."""
    board = c.oversight

    async def decide(what: str, target: str, operator: str, form: dict[str, str]) -> bool:
        """Do `what` to `target`; False when there is no such action."""
        if what in ("approve", "deny"):
            board.approvals.decide(target, operator, what == "approve", form.get("reason", ""))
        elif what == "takeover":
            await board.take_over(target, operator, viewer=None, how="console")
        elif what == "handback":
            await board.hand_back(target, operator)
        elif what == "stop":
            await board.stop(target, operator)
        else:
            return False
        return True

    async def act(request: Request, login: Login) -> Response:
        form = await read_form(request)
        if not c.csrf_ok(request, login, form):
            return secured(JSONResponse({"error": "missing or wrong CSRF token"}, 403))
        what, target = request.path_params["what"], request.path_params["target"]
        try:
            if not await decide(what, target, login.operator, form or {}):
                return secured(JSONResponse({"error": f"unknown action {what}"}, 404))
        except (ApprovalError, SeatError) as exc:
            return secured(JSONResponse({"error": str(exc)}, status_code=409))
        if "application/json" in request.headers.get("accept", ""):
            return secured(JSONResponse({"ok": True}))
        back = request.headers.get("referer") or "/console/"
        return secured(RedirectResponse(back if back.startswith("/console") else "/console/", 303))

    return [Route("/console/act/{what}/{target}", c.logged_in(act, _json_401), methods=["POST"])]


def _live_routes(c: _Console, bridge: LiveBridge | None) -> list[BaseRoute]:
    """The live view: noVNC over a WebSocket, bridged to the seat's screen by `bridge`."""
    viewers = itertools.count(1)

    async def vnc(websocket: WebSocket) -> None:
        login = c.login_of(websocket)
        agent = websocket.path_params["agent"]
        origin_ok = same_origin(websocket.headers.get("origin"), websocket.headers.get("host"))
        if login is None or not origin_ok or agent not in c.oversight.seats():
            why = (
                "no login" if login is None else "foreign origin" if not origin_ok else "no session"
            )
            c.oversight.audit.record("console_vnc_refused", agent, {"why": why})
            await websocket.close(code=1008)
            return
        if bridge is None:
            await websocket.close(code=1011)
            return
        viewer = f"v{next(viewers)}"
        operator = login.operator

        async def on_input(message: ClientMessage) -> bool:
            if c.login_of(websocket) is None:
                return False  # logged out or removed meanwhile: view only
            # Moving the mouse over the live view (a PointerEvent with no button) is not
            # taking the desktop: it is forwarded only to the viewer who holds the seat.
            hover = message.name == "PointerEvent" and not message.buttons
            try:
                return await c.oversight.viewer_input(agent, operator, viewer, take=not hover)
            except SeatError:
                return False

        try:
            await bridge(websocket, agent, on_input)
        finally:
            c.oversight.viewer_left(agent, viewer)

    return [WebSocketRoute("/console/sessions/{agent}/vnc", vnc)]
