"""The console's recordings (issue 24): the past sessions page, a recording's player page,
its video (with HTTP ranges, so the player seeks) and its timeline as JSON. Behind the
console's login like every other page; the files come from `CORRAL_HOME/recordings`
(orchestrator.recordings.store), so they play after their session and gateway ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from orchestrator.errors import RecordingError
from orchestrator.people import console_pages as pages
from orchestrator.people.console_auth import Login, secured
from orchestrator.recordings.store import RecordingStore

Handler = Callable[[Request, Login], Awaitable[Response]]
Guard = Callable[[Handler, Callable[[], Response]], Callable[[Request], Awaitable[Response]]]


def recording_routes(
    store: RecordingStore,
    logged_in: Guard,
    to_login: Callable[[], Response],
    refused: Callable[[], Response],
) -> list[BaseRoute]:
    """The routes, each wrapped by the console's `logged_in` (a page without a login goes
    to the login page; the video and the JSON answer 401)."""

    async def past_page(request: Request, login: Login) -> Response:
        found = await anyio.to_thread.run_sync(store.all)
        html = pages.recordings_page(login.operator, login.csrf, [m.model_dump() for m in found])
        return _html(html)

    async def player_page(request: Request, login: Login) -> Response:
        try:
            meta = store.meta(request.path_params["rid"])
        except RecordingError as exc:
            return _html(pages.message_page("No recording", str(exc)), 404)
        return _html(pages.recording_page(login.operator, login.csrf, meta.model_dump()))

    async def video(request: Request, login: Login) -> Response:
        try:
            path = await anyio.to_thread.run_sync(store.video, request.path_params["rid"])
        except RecordingError:
            return secured(Response(status_code=404))
        return secured(FileResponse(path, media_type="video/webm"))

    async def timeline(request: Request, login: Login) -> Response:
        rid = request.path_params["rid"]
        try:
            meta = store.meta(rid)
        except RecordingError as exc:
            return secured(JSONResponse({"error": str(exc)}, status_code=404))
        entries = await anyio.to_thread.run_sync(store.timeline, rid)
        return secured(JSONResponse({"recording": meta.model_dump(), "timeline": entries}))

    return [
        Route("/console/recordings", logged_in(past_page, to_login), methods=["GET"]),
        Route("/console/recordings/{rid}", logged_in(player_page, to_login), methods=["GET"]),
        Route("/console/recordings/{rid}/video.webm", logged_in(video, refused), methods=["GET"]),
        Route(
            "/console/recordings/{rid}/timeline.json",
            logged_in(timeline, refused),
            methods=["GET"],
        ),
    ]


def _html(html: str, status: int = 200) -> Response:
    return secured(Response(html, status_code=status, media_type="text/html"))
