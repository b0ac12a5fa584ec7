"""The kiosk container and the one channel that drives it.

The container's main process is the kiosk agent (rig_images/kiosk). corral
attaches to its stdin and stdout once, at start, and speaks JSON lines over
that stream (docs/kiosk-internals.md): no network, no process spawned per
action. One request at a time per channel; every request has a deadline, and
a channel that missed one is broken (the session is then ended).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from docker.utils.socket import frames_iter

from orchestrator.docker_backend import DockerBackend, map_docker_errors
from orchestrator.errors import CorralError

logger = logging.getLogger("corral.kiosk")

SECCOMP_FILE = Path(__file__).resolve().parents[1] / "rig_images" / "kiosk" / "seccomp.json"
STDOUT = 1


class KioskError(CorralError):
    """The kiosk did not answer as it should."""


def kiosk_create_kwargs(
    *,
    image: str,
    labels: Mapping[str, str],
    network: str | None,
    seccomp: str | None,
    dns: list[str] | None = None,
) -> dict[str, Any]:
    """Docker create() arguments for a hardened kiosk container (pure)."""
    security = ["no-new-privileges"]
    if seccomp is not None:
        security.append(f"seccomp={seccomp}")
    return {
        "image": image,
        "labels": dict(labels),
        "user": "1000:1000",
        "network_mode": network or "none",
        "read_only": True,
        "mem_limit": 2 * 1024**3,
        "memswap_limit": 2 * 1024**3,
        "pids_limit": 256,
        "nano_cpus": 1_000_000_000,
        "cap_drop": ["ALL"],
        "security_opt": security,
        "tmpfs": {
            "/tmp": "rw,exec,nosuid,nodev,size=512m",
            "/home/sandbox": "rw,nosuid,nodev,size=256m,uid=1000,gid=1000",
        },
        "shm_size": 256 * 1024**2,
        "environment": {"HOME": "/home/sandbox"},
        "log_config": {"type": "none", "config": {}},
        "stdin_open": True,
        "tty": False,
        "detach": True,
        # On a session network, DNS goes only to its gateway (where the INPUT rule drops it).
        **({"dns": list(dns)} if network and dns else {}),
    }


class KioskChannel:
    """Owns one kiosk container: create, attach, start; request/answer; remove."""

    def __init__(self, backend: DockerBackend, create_kwargs: dict[str, Any]) -> None:
        self._backend = backend
        self._kwargs = create_kwargs
        self._container: Any = None
        self._sock: Any = None
        self._frames: Iterator[tuple[int, bytes]] | None = None
        self._buffer = b""
        self._next_id = 0
        self._lock = anyio.Lock()
        self.broken: str | None = None
        self.id = ""

    async def open(self) -> None:
        backend = self._backend
        await anyio.to_thread.run_sync(backend._watchdog.ensure_started)

        def create() -> None:
            with map_docker_errors(backend.url, self._kwargs["image"]):
                self._container = backend.client.containers.create(**self._kwargs)
                self.id = self._container.id or ""
                self._sock = backend.client.api.attach_socket(
                    self.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
                )
                self._frames = frames_iter(self._sock, tty=False)  # type: ignore[no-untyped-call]
                self._container.start()

        try:
            await anyio.to_thread.run_sync(create)
        except BaseException:
            await self.close()
            raise

    async def request(self, op: str, deadline: float, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its answer, at most `deadline` seconds."""
        if self.broken:
            raise KioskError(f"the kiosk is not usable: {self.broken}")
        async with self._lock:
            self._next_id += 1
            ident = self._next_id
            line = json.dumps({"id": ident, "op": op, **fields}).encode() + b"\n"
            try:
                with anyio.fail_after(deadline):
                    await anyio.to_thread.run_sync(self._raw().sendall, line)
                    while True:
                        answer = await self._read_line()
                        if answer.get("id") == ident:
                            break
            except TimeoutError as exc:
                self.broken = f"no answer to {op} within {deadline} s"
                raise KioskError(self.broken) from exc
            except OSError as exc:
                self.broken = f"the kiosk channel closed ({exc})"
                raise KioskError(self.broken) from exc
        if not answer.get("ok", False):
            raise KioskError(f"the kiosk could not {op}: {answer.get('error', 'unknown error')}")
        return answer

    def _raw(self) -> socket.socket:
        return getattr(self._sock, "_sock", self._sock)  # type: ignore[no-any-return]

    async def _read_line(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            assert self._frames is not None
            frame = await anyio.to_thread.run_sync(
                partial(next, self._frames, None), abandon_on_cancel=True
            )
            if frame is None:
                raise OSError("end of stream")
            stream, data = frame
            if stream == STDOUT:
                self._buffer += data
            else:
                for text in data.decode(errors="replace").splitlines():
                    logger.debug("kiosk %s: %s", self.id[:12], text)
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError as exc:
            raise OSError(f"not a JSON line: {line[:80]!r}") from exc
        return answer

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._sock is not None:
                raw = self._raw()
                with contextlib.suppress(OSError):
                    raw.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    raw.close()
                self._sock = None
            if self.id:
                await self._backend.remove(self.id)


def load_seccomp() -> str | None:
    try:
        return SECCOMP_FILE.read_text()
    except OSError:
        return None


__all__ = ["KioskChannel", "KioskError", "kiosk_create_kwargs", "load_seccomp"]
