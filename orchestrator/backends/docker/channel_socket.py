"""A long-lived container's channel on a unix socket of its own, not the engine's attach.

Through the attach, every byte of a kiosk's, desktop's or browser rig's channel crosses
dockerd and the container's shim both ways. Measured on this machine (bench/channel.py,
docs/benchmarks.md "A container's channel"; corral's channel to an agent that answers at
once): a round trip through the attach 0.31 ms back to back, 1.18 ms after a 50 ms pause,
1.89 ms p50 and 12.1 ms p95 while containers start and stop beside it (dockerd busy with
them); on a socket of its own 0.20, 0.84, 0.93 and 3.9 ms.

So the Docker backend, for a spec that asks (`ContainerSpec.channel_socket`: images whose
main process knows CORRAL_CHANNEL, rig_images/channel_socket.py), listens on a socket in a
private folder of its own (0700, removed with the backend), bind-mounts that one socket
read-only at `TARGET` and names it in the environment; the main process connects first
thing and makes it its stdin and stdout. The gateway accepts exactly one connection, then
closes the listener and unlinks the socket: a second connection from the container (or
anyone) is refused. Read-only does not stop a connect (a socket is not written through
its file); it stops the container from replacing the file.

Only where the engine runs the container beside this process with runc (`fits`): a remote
engine's bind mounts are another machine's files, and gVisor serves no host socket to its
sandbox. Everywhere else the attach stays.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio

from orchestrator.backends.docker.attach import RECV_BYTES, STDOUT, AttachSocket
from orchestrator.backends.folders import private_folder
from orchestrator.errors import EngineError
from sandboxes.ports import BindMount, ContainerSpec

TARGET = "/run/corral-channel"  # where the container sees its socket
VARIABLE = "CORRAL_CHANNEL"  # rig_images/channel_socket.py reads it
CONNECT_S = 120.0  # how long a started container has to connect (40 kiosks at once: seconds)
# While none connected, the engine is asked whether the container still runs after 0.25 s,
# then at twice the last wait, at most every 2 s: 60 kiosks starting at once on a loaded
# host (seconds each) must not ask it a hundred times a second.
FIRST_CHECK_S, LAST_CHECK_S = 0.25, 2.0
PREFIX = "corral-ch-"  # the folders' names: corral-ch-<pid>-<random>
LOCAL_ENGINE = ("unix://", "http+unix://")
HINT = (  # what an operator can do when the engine cannot reach the socket
    f" (its socket is mounted from this process's {tempfile.gettempdir()}: an engine that"
    " sees another one, such as a gateway under systemd's PrivateTmp, needs"
    " `[backend] channel_socket = false`)"
)


def attach_reason(enabled: bool, url: str, runtime: str, whose: str = "the runtime") -> str | None:
    """Why a channel stays on the engine's attach, or None when it may have a socket of its
    own (pure; the one rule): `[backend] channel_socket` on, the engine this machine's (a
    unix socket) and the container's runtime runc (`whose` names that runtime in words)."""
    if not enabled:
        return "[backend] channel_socket = false"
    if not url.startswith(LOCAL_ENGINE):
        return f"the engine at {url} is not this machine's"
    if runtime != "runc":
        return f"{whose} is {runtime}, not runc"
    return None


def fits(
    spec: ContainerSpec, url: str, default_runtime: str = "runc", *, enabled: bool = True
) -> bool:
    """Whether `spec`'s channel goes on a socket of its own (pure): the spec asks, and
    `attach_reason` has none for its runtime (the spec's, else the engine's default)."""
    runtime = spec.runtime or default_runtime
    return spec.channel_socket and attach_reason(enabled, url, runtime) is None


def default_runtime_of(info: Mapping[str, Any]) -> str:
    """The engine's default OCI runtime, from `docker info` (pure)."""
    return str(info.get("DefaultRuntime") or "runc")


def describe(enabled: bool, url: str, default_runtime: str) -> str:
    """`corral doctor`'s words for where the kiosks' and rigs' channels go (pure)."""
    why = attach_reason(enabled, url, default_runtime, whose="its default runtime")
    if why is not None:
        return f"the engine's attach ({why})"
    return (
        f"a unix socket of their own, mounted from {tempfile.gettempdir()} (the engine must"
        " see it at the same path; else [backend] channel_socket = false)"
    )


class ChannelFolder:
    """The private folder (0700) where a backend's channel sockets are made; removed with
    the backend. Its name carries the process id: a folder left by a process that died
    (SIGKILL) is removed when the next one makes its own (`sweep`)."""

    def __init__(self, parent: Path | None = None) -> None:
        self._parent = parent or Path(tempfile.gettempdir())
        self._path: Path | None = None

    def socket_path(self) -> Path:
        if self._path is None:  # a short path: a socket's may not pass 107 bytes
            self._path = private_folder(PREFIX, self._parent)
        return self._path / secrets.token_hex(8)

    def remove(self) -> None:
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None


class ChannelListener:
    """One container's socket, listening until its main process connected."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(str(path))
            os.chmod(path, 0o666)  # the container's user, whatever its uid; the folder is 0700
            self._sock.listen(1)
            self._sock.setblocking(False)
        except BaseException:
            self.close()
            raise

    def spec_for(self, spec: ContainerSpec) -> ContainerSpec:
        """`spec` with the socket mounted (read-only) and named in its environment."""
        return dataclasses.replace(
            spec,
            mounts=(*spec.mounts, BindMount(source=str(self.path), target=TARGET)),
            environment={**spec.environment, VARIABLE: TARGET},
        )

    async def accept(self, running: Callable[[], Awaitable[bool]]) -> socket.socket:
        """The main process's connection. EngineError when the container stopped, or did
        not connect within CONNECT_S, first."""
        check = FIRST_CHECK_S
        with anyio.move_on_after(CONNECT_S):
            while True:
                with anyio.move_on_after(check):
                    await anyio.wait_readable(self._sock)
                with contextlib.suppress(BlockingIOError, InterruptedError):
                    connection, _ = self._sock.accept()
                    return connection
                if not await running():
                    raise EngineError(f"the container stopped before its channel connected{HINT}")
                check = min(check * 2, LAST_CHECK_S)
        raise EngineError(f"the container's channel did not connect within {CONNECT_S:.0f} s{HINT}")

    def close(self) -> None:
        """Stop listening and unlink the socket (idempotent): no later connection."""
        with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: no event loop
            anyio.notify_closing(self._sock)
        self._sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()


class SocketStream(AttachSocket):
    """The accepted connection, read as the attach's stdout frames are (the bytes as they
    come: no frames on a socket of its own)."""

    async def next_frame(self) -> tuple[int, bytes] | None:
        while not self.closed:
            try:
                data = self.raw.recv(RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_readable(self.raw)
                continue
            return (STDOUT, data) if data else None
        return None
