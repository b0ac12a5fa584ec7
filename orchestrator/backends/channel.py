"""The channel that drives a kiosk container's agent.

The container's main process is the kiosk agent (rig_images/kiosk). corral
attaches to its stdin and stdout once, at start (`ContainerBackend.open_attached`),
and speaks JSON lines over that stream (docs/kiosk-internals.md): no network,
no process spawned per action. One request at a time per channel; every
request has a deadline, and a channel that missed one is broken (the session
is then ended). An agent's channel has a heartbeat too: while a request waits, a ping goes
every half second, which the agent answers from a thread of its own even while an op runs
(rig_images/kiosk/kiosk_agent/serve.py); a ping left `SILENCE_S` with no byte after it
means the agent hung (sandboxes.liveness), and the channel is broken then, not at the
request's deadline. The heartbeat is
armed once the agent has answered a first request: until then it may still be starting
(on a host starting 40 kiosks at once that took seconds: a measured false alarm).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from orchestrator.errors import CorralError, KioskError
from sandboxes.liveness import FIRST_PING_S, HEARTBEAT_S, SILENCE_S, Liveness
from sandboxes.ports import AttachedContainer, ContainerBackend, ContainerSpec

SECCOMP_FILE = Path(__file__).resolve().parents[2] / "rig_images" / "kiosk" / "seccomp.json"
# The largest answer line the kiosk may send (a 1920x1200 PNG in base64 is well under 16
# MiB). More without a line end is a flood: the channel breaks and the session ends.
MAX_LINE_BYTES = 32 * 1024 * 1024
EXIT_READ_S = 2.0  # how long a closed channel waits for the engine to say how it ended


class ChannelFlood(Exception):
    """The kiosk sent more than the channel takes in one line (internal to this module)."""


class Silent(Exception):
    """The agent answered nothing, not even a ping, for SILENCE_S (internal)."""


class KioskChannel:
    """JSON lines over one attached container: request/answer with deadlines. The kiosk
    agent's channel, and the egress proxy's control channel (`name` says which in
    messages)."""

    def __init__(
        self,
        container: AttachedContainer,
        max_line_bytes: int = MAX_LINE_BYTES,
        *,
        name: str = "kiosk",
        heartbeat: bool = False,
    ) -> None:
        self.name = name
        self._heartbeat = heartbeat
        self._life = Liveness()  # the agent's signs of life while an answer is awaited
        self._answered = False  # the agent answered a request: it runs its main loop
        self._container = container
        self._max_line = max_line_bytes
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for a line end
        self._next_id = 0
        self._lock = anyio.Lock()
        self.broken: str | None = None
        self.id = container.id

    @classmethod
    async def open(cls, backend: ContainerBackend, spec: ContainerSpec) -> KioskChannel:
        """An agent's channel (with the heartbeat)."""
        return cls(await backend.open_attached(spec), heartbeat=True)

    async def request(self, op: str, deadline: float, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its answer, at most `deadline` seconds in all
        (waiting for an earlier request to finish included)."""
        if self.broken:
            raise KioskError(f"the {self.name} is not usable: {self.broken}")
        with anyio.move_on_after(deadline) as waiting:
            await self._lock.acquire()
        if waiting.cancelled_caught:
            raise KioskError(f"the {self.name} was busy with another request for {deadline} s")
        try:
            if self.broken:
                raise KioskError(f"the {self.name} is not usable: {self.broken}")
            self._next_id += 1
            ident = self._next_id
            line = json.dumps({"id": ident, "op": op, **fields}).encode() + b"\n"
            try:
                with anyio.fail_after(deadline):
                    await self._container.send(line)
                    answer = await self._answer_to(ident)
            except TimeoutError as exc:
                self.broken = f"no answer to {op} within {deadline} s"
                raise KioskError(self.broken) from exc
            except Silent as exc:
                self.broken = (
                    f"the {self.name} stopped answering: no sign of life for {SILENCE_S} s "
                    f"while it ran {op}"
                )
                raise KioskError(self.broken) from exc
            except ChannelFlood as exc:
                self.broken = str(exc)
                raise KioskError(self.broken) from exc
            except OSError as exc:
                self.broken = f"the {self.name} channel closed ({exc}{await self._exit_note()})"
                raise KioskError(self.broken) from exc
        finally:
            self._lock.release()
        if not answer.get("ok", False):
            raise KioskError(
                f"the {self.name} could not {op}: {answer.get('error', 'unknown error')}"
            )
        return answer

    async def _exit_note(self) -> str:
        """How the container ended, when the engine says so within EXIT_READ_S: an OOM
        kill is named (it answers like any killed kiosk, and the operator learns why)."""
        with anyio.move_on_after(EXIT_READ_S):
            try:
                ended = await self._container.wait()
            except CorralError:  # removed already, or the engine did not say
                return ""
            if ended.oom_killed:
                return "; the engine killed it for lack of memory (OOM), inside its memory limit"
            return f"; its container exited with code {ended.exit_code}"
        return ""

    async def _answer_to(self, ident: int) -> dict[str, Any]:
        self._life = Liveness()
        if not (self._heartbeat and self._answered):  # armed once the agent has answered:
            return await self._read_until(ident)  # before, it may still be starting up
        # (an interpreter's start on a loaded host takes seconds; the deadline covers it)
        with anyio.move_on_after(FIRST_PING_S):  # most answers come before any ping is due:
            return await self._read_until(ident)  # no pinging task for them (issue 23 item 9)
        answer: dict[str, Any] | None = None  # (every receive keeps what it read if cancelled)
        failed: OSError | ChannelFlood | None = None
        async with anyio.create_task_group() as beats:
            beats.start_soon(self._beat, beats.cancel_scope)
            try:
                answer = await self._read_until(ident)
            except (OSError, ChannelFlood) as exc:  # raised as itself, not in a group
                failed = exc
            beats.cancel_scope.cancel()
        if failed is not None:
            raise failed
        if answer is None:
            raise Silent
        return answer

    async def _beat(self, reading: anyio.CancelScope) -> None:
        """Ping while the answer is awaited (started once it has been awaited
        FIRST_PING_S: a quick op sends none; then every HEARTBEAT_S); cancel the read once
        a ping has waited SILENCE_S with no byte after it (sandboxes.liveness: a stall of
        our own is not silence)."""
        while True:
            now = anyio.current_time()
            silent = self._life.silent(now)
            if not silent:
                self._next_id += 1
                ping = json.dumps({"id": self._next_id, "op": "ping"}).encode() + b"\n"
                self._life.asked(now)
                with anyio.move_on_after(SILENCE_S) as sending:  # a stdin nobody reads
                    try:
                        await self._container.send(ping)
                    except OSError:  # closed under us: the read sees the end, or nothing
                        silent = True
                silent = silent or sending.cancelled_caught
            if silent:
                reading.cancel()
                return
            await anyio.sleep(HEARTBEAT_S)

    async def _read_until(self, ident: int) -> dict[str, Any]:
        while True:
            answer = await self._read_line()
            if answer.get("id") == ident and not answer.get("pong"):
                self._answered = True
                return answer

    async def _read_line(self) -> dict[str, Any]:
        while (end := self._buffer.find(b"\n", self._scanned)) < 0:
            self._scanned = len(self._buffer)
            if self._scanned > self._max_line:
                self._buffer.clear()
                self._scanned = 0
                raise ChannelFlood(
                    f"the {self.name} sent more than {self._max_line // (1024 * 1024)} MiB without "
                    "a line end (a flood)"
                )
            data = await self._container.receive()
            if data is None:
                raise OSError("end of stream")
            self._life.heard()  # any byte is a sign of life
            self._buffer += data
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        self._scanned = 0
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError as exc:
            raise OSError(f"not a JSON line: {line[:80]!r}") from exc
        return answer

    async def close(self) -> None:
        """Close the channel and remove the container (shielded, idempotent)."""
        await self._container.close()


def load_seccomp() -> str | None:
    try:
        return SECCOMP_FILE.read_text()
    except OSError:
        return None


__all__ = ["KioskChannel", "KioskError", "load_seccomp"]
