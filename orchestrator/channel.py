"""The channel that drives a kiosk container's agent.

The container's main process is the kiosk agent (rig_images/kiosk). corral
attaches to its stdin and stdout once, at start (`ContainerBackend.open_attached`),
and speaks JSON lines over that stream (docs/kiosk-internals.md): no network,
no process spawned per action. One request at a time per channel; every
request has a deadline, and a channel that missed one is broken (the session
is then ended).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from orchestrator.errors import KioskError
from sandboxes.ports import AttachedContainer, ContainerBackend, ContainerSpec

SECCOMP_FILE = Path(__file__).resolve().parents[1] / "rig_images" / "kiosk" / "seccomp.json"
# The largest answer line the kiosk may send (a 1920x1200 PNG in base64 is well under 16
# MiB). More without a line end is a flood: the channel breaks and the session ends.
MAX_LINE_BYTES = 32 * 1024 * 1024


class ChannelFlood(Exception):
    """The kiosk sent more than the channel takes in one line (internal to this module)."""


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
    ) -> None:
        self.name = name
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
        return cls(await backend.open_attached(spec))

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
                    while True:
                        answer = await self._read_line()
                        if answer.get("id") == ident:
                            break
            except TimeoutError as exc:
                self.broken = f"no answer to {op} within {deadline} s"
                raise KioskError(self.broken) from exc
            except ChannelFlood as exc:
                self.broken = str(exc)
                raise KioskError(self.broken) from exc
            except OSError as exc:
                self.broken = f"the {self.name} channel closed ({exc})"
                raise KioskError(self.broken) from exc
        finally:
            self._lock.release()
        if not answer.get("ok", False):
            raise KioskError(
                f"the {self.name} could not {op}: {answer.get('error', 'unknown error')}"
            )
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
