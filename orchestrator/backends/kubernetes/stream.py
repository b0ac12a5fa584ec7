"""The Kubernetes backend's wire: error translation and the attach/exec WebSocket.

kr8s and httpx exceptions are translated into `orchestrator.errors` in one place,
`map_kube_errors`, whose messages name the API server, the kubeconfig and the context
that were tried. `ChannelStream` speaks the channel protocol of `attach` and `exec`
(`v5.channel.k8s.io`, else `v4.channel.k8s.io`): each binary message is one byte of
channel (0 stdin, 1 stdout, 2 stderr, 3 error, 255 close, v5 only) and its data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import httpx_ws
import kr8s
from wsproto.utilities import LocalProtocolError

from orchestrator.backends.channel import MAX_LINE_BYTES
from orchestrator.errors import (
    CorralError,
    EngineConflict,
    EngineError,
    EngineNotFound,
    SandboxUnavailable,
    UnavailableCode,
)

logger = logging.getLogger("corral.kubernetes")

STDIN, STDOUT, STDERR, ERROR, CLOSE = 0, 1, 2, 3, 255
PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io"]
# How a server ends a stream whose process ended: a normal close, or a close frame with no
# code. Any other end (another code, a network error, the session failing) breaks it.
CLEAN_CLOSES = (1000, 1005)
# The largest message taken from the API server. httpx-ws (kr8s's WebSocket client) closes a
# stream with 1009 past 64 KiB by default since its 0.10, and one output chunk of a full
# pipe (64 KiB) and its channel byte is over that. A kiosk's largest line is the limit.
MAX_MESSAGE_BYTES = MAX_LINE_BYTES
# What a write on a stream the server has closed raises (the server may close first).
_CLOSED = (
    httpx_ws.HTTPXWSException,
    LocalProtocolError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)
FIX_REACH = (
    "check `kubeconfig`/`context` under [backend] in config.toml and that the cluster "
    "answers (`kubectl --kubeconfig PATH get ns`)"
)


@dataclass(frozen=True, slots=True)
class ClusterTarget:
    """What was tried, for every message that says a cluster could not be used."""

    kubeconfig: str
    context: str | None
    namespace: str
    server: str = "?"

    def describe(self) -> str:
        context = self.context or "its current context"
        return f"the API server {self.server} (kubeconfig {self.kubeconfig}, {context})"


def _status_message(exc: kr8s.ServerError) -> str:
    status: dict[str, Any] = exc.status if isinstance(exc.status, dict) else {}
    return str(status.get("message") or exc)


def status_code(exc: BaseException) -> int | None:
    if isinstance(exc, kr8s.ServerError) and exc.response is not None:
        return exc.response.status_code
    return None


@contextlib.contextmanager
def map_kube_errors(target: ClusterTarget, image: str | None = None) -> Iterator[None]:
    """Translate client errors, most specific first; ours pass through."""
    try:
        yield
    except CorralError:
        raise
    except kr8s.ServerError as exc:
        code = status_code(exc)
        if code in (401, 403) and "PodSecurity" not in _status_message(exc):
            raise SandboxUnavailable(
                UnavailableCode.PERMISSION_DENIED,
                f"{target.describe()} refused corral's credentials in namespace "
                f"{target.namespace}: {_status_message(exc)}",
                "grant the kubeconfig's user pods, pods/attach, pods/exec, pods/log, "
                "configmaps and networkpolicies in that namespace (docs/kubernetes.md)",
            ) from exc
        message = f"Kubernetes API error ({code}): {_status_message(exc)}"
        if code == 404:
            raise EngineNotFound(message) from exc
        if code == 409:
            raise EngineConflict(message) from exc
        raise EngineError(message) from exc
    except (httpx.TransportError, kr8s.APITimeoutError, OSError) as exc:
        raise SandboxUnavailable(
            UnavailableCode.DAEMON_UNREACHABLE,
            f"{target.describe()} does not answer: {exc.__class__.__name__}: {exc}",
            FIX_REACH,
        ) from exc
    except (httpx_ws.HTTPXWSException, ExceptionGroup) as exc:
        raise EngineError(f"Kubernetes stream failed: {exc}") from exc


def exit_code_of(status: Mapping[str, Any]) -> int | None:
    """The exit code an exec's error-channel Status carries (0 on Success)."""
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            return int(cause.get("message", "-1"))
    return None


class ChannelStream:
    """One `attach` or `exec` WebSocket to a pod's container.

    The WebSocket session (httpx_ws) holds a task group for its lifetime, which must be
    left in the task and scope it was entered in. A surface's stream is opened in one
    call and closed in another, often under a shield (`Surface.close`), so the session
    is held by a task of its own (`_hold`): `open` and `close` may come from any task
    or scope. An asyncio task, not an anyio one: anyio has no task that outlives the
    caller's task group, and corral runs on asyncio (uvicorn, Playwright)."""

    def __init__(
        self, target: ClusterTarget, pod: str, verb: str, params: Mapping[str, Any]
    ) -> None:
        self._target = target
        self._pod = pod
        self._verb = verb
        self._params = dict(params)
        self._holder: asyncio.Task[None] | None = None
        self._closing = anyio.Event()
        self._ws: httpx_ws.AsyncWebSocketSession | None = None
        self.status: dict[str, Any] | None = None
        self.protocol = ""
        self.broken: str | None = None  # why the stream ended before the server closed it
        self._failure: BaseException | None = None

    async def open(self, api: Any) -> None:
        """Connect through `api` (a kr8s Api), offering v5 then v4."""
        opened: asyncio.Future[httpx_ws.AsyncWebSocketSession] = (
            asyncio.get_running_loop().create_future()
        )
        self._holder = asyncio.create_task(self._hold(api, opened))
        try:
            self._ws = await asyncio.shield(opened)
        except BaseException:
            await self.close()
            raise
        self.protocol = self._ws.subprotocol or ""

    async def _hold(self, api: Any, opened: asyncio.Future[httpx_ws.AsyncWebSocketSession]) -> None:
        try:
            with map_kube_errors(self._target):
                async with api.open_websocket(
                    version="v1",
                    namespace=self._target.namespace,
                    url=f"pods/{self._pod}/{self._verb}",
                    params=self._params,
                    subprotocols=PROTOCOLS,
                    max_message_size_bytes=MAX_MESSAGE_BYTES,
                ) as ws:
                    opened.set_result(ws)
                    await self._closing.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            elif not isinstance(exc, Exception):
                raise
            else:
                self._failure = exc
                logger.debug("pod %s: the %s stream ended: %s", self._pod, self._verb, exc)

    async def send(self, data: bytes) -> None:
        if self._ws is None:
            raise OSError("the stream is closed")
        try:
            await self._ws.send_bytes(bytes([STDIN]) + data)
        except _CLOSED as exc:
            raise OSError(f"the stream is closed: {exc}") from exc

    async def close_stdin(self) -> None:
        """v5: the process sees its stdin end. v4 cannot say so (the stream must close)."""
        if self._ws is not None and self.protocol.startswith("v5."):
            with contextlib.suppress(*_CLOSED):
                await self._ws.send_bytes(bytes([CLOSE, STDIN]))

    async def next_frame(self) -> tuple[int, bytes] | None:
        """The next (channel, data) of stdout or stderr; None once the server closed the
        stream (or it broke: then `broken` says why). The error channel's Status is kept in
        `status`."""
        while (ws := self._ws) is not None:
            try:
                message = await ws.receive_bytes()
            except httpx_ws.WebSocketDisconnect as exc:
                if exc.code not in CLEAN_CLOSES:
                    # The server's close, or the client's own (httpx-ws closes with 1009
                    # past its message limit): a close frame either way.
                    self._broke(f"closed with code {exc.code} {exc.reason}".strip())
                return None
            except (httpx_ws.HTTPXWSException, anyio.ClosedResourceError) as exc:
                if self._ws is ws:  # not our own close
                    cause = self._failure or exc
                    self._broke(f"{cause.__class__.__name__}: {cause}".rstrip(": "))
                return None
            if not message:
                continue
            channel, data = message[0], message[1:]
            if channel == ERROR:
                with contextlib.suppress(ValueError):
                    self.status = json.loads(data)
            elif channel in (STDOUT, STDERR) and data:
                return channel, data
        return None

    def _broke(self, why: str) -> None:
        self.broken = why
        logger.warning("pod %s: the %s stream broke: %s", self._pod, self._verb, why)

    async def receive_stdout(self) -> bytes | None:
        """The next stdout chunk (stderr is logged); None at the end."""
        while (frame := await self.next_frame()) is not None:
            channel, data = frame
            if channel == STDOUT:
                return data
            for line in data.decode(errors="replace").splitlines():
                logger.debug("pod %s: %s", self._pod, line)
        return None

    async def close(self) -> None:
        """Close the WebSocket (idempotent): its holding task leaves the session. Waited
        for, not awaited: the holder's own end (an error, a cancellation) is not the
        caller's, and a caller cancelled meanwhile leaves it to finish on its own."""
        holder, self._holder, self._ws = self._holder, None, None
        self._closing.set()
        if holder is not None:
            await asyncio.wait([holder])
