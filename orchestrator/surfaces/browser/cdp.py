"""The browser rig's CDP channel, from the gateway's side (docs/rigs.md, "The CDP channel").

Chromium in the rig speaks CDP on a pipe (`--remote-debugging-pipe`: NUL-ended JSON
messages); `rig_images/browser/cdp_pipe.py` relays that pipe on the container's
stdin/stdout, which the gateway holds through the engine's attach API. Playwright's
`connect_over_cdp` wants a WebSocket, so the gateway serves one on a unix socket that
only it can open (a 0700 directory, the socket 0600) and passes Playwright the URL
`ws+unix://<socket>:/devtools/browser/corral` (Node's `ws` library understands it).
Each WebSocket text message is one CDP message. No TCP port exists anywhere on the way,
on any network; the first connection is the only one ever accepted.

A heartbeat, as the kiosk's channel has (`orchestrator.backends.channel`): while the bridge serves,
it sends the browser its own `Browser.getVersion` every `HEARTBEAT_S` (ids from
`PING_BASE`, far above Playwright's; the answers are not passed on), and a ping left
`SILENCE_S` with no byte from the rig after it (sandboxes.liveness) means the browser or
its relay hung: the bridge closes with
that reason, Playwright's calls in flight fail at once, and the rig is ended saying why.

Calls of the gateway's own (`call`: the secret-field probe's, the screenshots', on the
sessions of `browser/direct.py`) go on the same pipe with ids from `OWN_BASE`, between
Playwright's and the heartbeat's; their answers, and the events of the sessions they
opened (`listen`), are kept from Playwright. So a probe's call crosses the attach stream
only, not Playwright's driver and its WebSocket as well. Chromium writes a message's `id`
first and a flat session's `sessionId` last, so both are told apart without parsing the
rest (a screenshot of Playwright's is megabytes).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from websockets.asyncio.server import Server, ServerConnection, unix_serve
from websockets.exceptions import ConnectionClosed

from orchestrator.backends.folders import private_folder
from orchestrator.errors import CdpCallFailed, RigError
from sandboxes.liveness import HEARTBEAT_S, SILENCE_S, Liveness
from sandboxes.ports import AttachedContainer

logger = logging.getLogger("corral.rigs")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a full-page screenshot in base64 fits
MAX_READY_LINE = 64 * 1024
DIR_PREFIX = "corral-cdp-"  # the bridge's folder: corral-cdp-<pid>-<random>
PING_BASE = 2_000_000_000  # the heartbeat's CDP ids; Playwright's count up from 1
OWN_BASE = 1_000_000_000  # the gateway's own calls' ids
ID_FIRST = b'{"id":'  # how an answer begins
HUNG = f"the browser stopped answering: no sign of life for {SILENCE_S} s"
Listener = Callable[[str, dict[str, Any]], None]  # an event's method and params


@dataclass(eq=False)
class _Waiting:
    """One own call in flight: its session, and its answer (or why it has none) once in."""

    session: str | None
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: dict[str, Any] | None = None
    failed: str | None = None

    def settle(self, answer: dict[str, Any] | None, failed: str | None = None) -> None:
        self.answer, self.failed = answer, failed
        self.done.set()


def answer_id(message: bytes) -> int | None:
    """The id of an answer (Chromium writes it first); None for an event."""
    if not message.startswith(ID_FIRST):
        return None
    end = message.find(b",", len(ID_FIRST), len(ID_FIRST) + 20)
    try:
        return int(message[len(ID_FIRST) : end]) if end > 0 else None
    except ValueError:
        return None


async def handshake(
    container: AttachedContainer, config: dict[str, Any], deadline: float
) -> tuple[dict[str, Any], bytes]:
    """Send the rig its start line; return its ready answer and any CDP bytes after it."""
    await container.send(json.dumps(config).encode() + b"\n")
    buffer = b""
    with anyio.fail_after(deadline):
        while b"\n" not in buffer:
            chunk = await container.receive()
            if chunk is None:
                raise RigError("the browser rig ended before it was ready")
            buffer += chunk
            if len(buffer) > MAX_READY_LINE:
                raise RigError("the browser rig sent a start answer that is too long")
    line, _, rest = buffer.partition(b"\n")
    answer: dict[str, Any] = json.loads(line)
    if not answer.get("ok"):
        raise RigError(f"the browser rig could not start: {answer.get('error', 'unknown')}")
    return answer, rest


class CdpBridge:
    """A WebSocket server on a private unix socket, relaying to one rig's CDP pipe."""

    def __init__(self, container: AttachedContainer, pending: bytes = b"") -> None:
        self._container = container
        self._pending = pending
        self._dir = private_folder(DIR_PREFIX)  # 0700, ours only; a dead gateway's swept
        self.socket_path = self._dir / "cdp.sock"
        self._server: Server | None = None
        self._served = False
        self.closed_reason: str | None = None
        self._sending = anyio.Lock()  # one CDP message at a time on the pipe
        self._life = Liveness()  # the rig's signs of life
        self._relaying = False  # the rig's messages are read (Playwright is connected)
        self._next_id = OWN_BASE
        self._waiting: dict[int, _Waiting] = {}
        self._listeners: dict[bytes, tuple[str, Listener]] = {}  # by `"sessionId":"…"}`

    @property
    def url(self) -> str:
        return f"ws+unix://{self.socket_path}:/devtools/browser/corral"

    async def start(self) -> None:
        old = os.umask(0o177)  # the socket is created 0600
        try:
            self._server = await unix_serve(
                self._handle, str(self.socket_path), max_size=MAX_MESSAGE_BYTES, compression=None
            )
        finally:
            os.umask(old)
        os.chmod(self.socket_path, 0o600)

    async def _handle(self, ws: ServerConnection) -> None:
        if self._served:
            await ws.close(code=1008, reason="this rig's CDP channel is taken")
            return
        self._served = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._down, ws, tg.cancel_scope)
                tg.start_soon(self._beat, tg.cancel_scope)
                try:
                    async for message in ws:
                        data = message.encode() if isinstance(message, str) else message
                        await self._send(data + b"\0")
                except (ConnectionClosed, OSError) as exc:
                    logger.info("CDP bridge ended: %s", exc)
                tg.cancel_scope.cancel()
        finally:
            self._relaying = False
            self._end_calls(self.closed_reason or "Playwright's CDP connection closed")

    async def _send(self, data: bytes) -> None:
        async with self._sending:
            await self._container.send(data)

    async def _down(self, ws: ServerConnection, serving: anyio.CancelScope) -> None:
        """The rig's CDP messages to Playwright, but the gateway's own (`_own`). A message
        of a session the gateway attached before it listens is passed on: Playwright drops
        a message of a session it does not know."""
        buffer = self._pending
        self._pending = b""
        self._relaying = True
        while True:
            while b"\0" in buffer:
                message, _, buffer = buffer.partition(b"\0")
                if not self._own(message):
                    await ws.send(message.decode("utf-8", errors="replace"))
            if len(buffer) > MAX_MESSAGE_BYTES:
                self.closed_reason = "the rig sent a CDP message that is too long"
                break
            chunk = await self._container.receive()
            if chunk is None:
                self.closed_reason = "the rig's CDP pipe closed"
                break
            self._life.heard()
            buffer += chunk
        self._end_calls(self.closed_reason)
        serving.cancel()
        await ws.close()

    # ------------------------------------------------------------------ own calls
    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        """Send a CDP call of the gateway's own (on a flat `session`, or the browser's) and
        return its result; `CdpCallFailed` with Chromium's error, or when the session or
        the bridge ends first. Cancelled, its answer is dropped when it comes."""
        if self.closed_reason is not None or not self._relaying:
            raise CdpCallFailed(self.closed_reason or "the rig's CDP channel is not open")
        self._next_id += 1
        call_id, waiting = self._next_id, _Waiting(session)
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._waiting[call_id] = waiting
        try:
            await self._send(json.dumps(message).encode() + b"\0")
            await waiting.done.wait()
        finally:
            self._waiting.pop(call_id, None)
        if waiting.answer is None or "error" in waiting.answer:
            error = (waiting.answer or {}).get("error", {})
            why = str(error.get("message", waiting.failed or "no answer"))
            raise CdpCallFailed(f"{method}: {why}"[:300])
        result: dict[str, Any] = waiting.answer.get("result", {})
        return result

    def listen(self, session: str, listener: Listener) -> None:
        """Hand the events of `session` (one this gateway opened) to `listener`."""
        self._listeners[f'"sessionId":"{session}"}}'.encode()] = (session, listener)

    def ended(self, session: str, why: str) -> None:
        """`session` is gone: no more of its events; its calls in flight fail."""
        self._listeners = {k: v for k, v in self._listeners.items() if v[0] != session}
        self._end_calls(why, session)

    def _end_calls(self, why: str | None, session: str | None = None) -> None:
        for waiting in list(self._waiting.values()):
            if session is None or waiting.session == session:
                waiting.settle(None, why or "the rig's CDP channel closed")

    def _own(self, message: bytes) -> bool:
        """Whether `message` is the gateway's own (an answer or an event of a session of
        its own, handed on here, or the heartbeat's answer): then not Playwright's."""
        number = answer_id(message)
        if number is not None:
            if OWN_BASE <= number < PING_BASE and (waiting := self._waiting.get(number)):
                waiting.settle(json.loads(message))
            return number >= OWN_BASE
        for tail, (_, listener) in self._listeners.items():
            if message.endswith(tail):
                event = json.loads(message)
                try:
                    listener(str(event.get("method", "")), event.get("params") or {})
                except Exception:  # a listener's fault must not end the channel
                    logger.exception("a CDP event listener failed")
                return True
        return False

    # ------------------------------------------------------------------ heartbeat
    async def _beat(self, serving: anyio.CancelScope) -> None:
        """Ping the browser; end the bridge once a ping has waited SILENCE_S with no byte
        from the rig after it."""
        sent = 0
        while True:
            await anyio.sleep(HEARTBEAT_S)
            now = anyio.current_time()
            if self._life.silent(now):
                self.closed_reason = HUNG
                serving.cancel()
                return
            sent += 1
            ping = {"id": PING_BASE + sent, "method": "Browser.getVersion"}
            self._life.asked(now)
            try:
                with anyio.move_on_after(SILENCE_S):  # a pipe nobody reads: silence decides
                    await self._send(json.dumps(ping).encode() + b"\0")
            except OSError:  # the pipe closed under us: the read side says so
                return

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with anyio.move_on_after(5):
                await self._server.wait_closed()
            self._server = None
        shutil.rmtree(self._dir, ignore_errors=True)
