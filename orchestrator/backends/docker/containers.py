"""The Docker backend's containers: a run (`DockerRun`: create, attach, start; its output
read, its exit awaited; removed on exit), a long-lived attached container
(`DockerAttached`, a kiosk's or proxy's channel) and a process exec'd in one
(`DockerExec`, the live view's relay). Every SDK call runs through `sdk.blocking`.
"""

from __future__ import annotations

import contextlib
import logging
import select
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.backends.docker import channel_socket
from orchestrator.backends.docker.attach import STDOUT, AttachSocket
from orchestrator.backends.docker.sdk import blocking
from orchestrator.errors import CorralError, EngineNotFound
from sandboxes.ports import ContainerSpec, ExitInfo
from sandboxes.scoped import Scoped

if TYPE_CHECKING:
    from orchestrator.backends.docker.backend import DockerBackend

logger = logging.getLogger("corral.docker")


class DockerRun(Scoped):
    """Create + attach + start on enter; force-remove on exit (shielded from cancellation)."""

    def __init__(self, backend: DockerBackend, spec: ContainerSpec) -> None:
        self._backend = backend
        self._spec = spec
        self._stream: AttachSocket | None = None
        self.id = ""
        self.image_id = ""

    async def open(self) -> None:
        """Create, attach and start (what entering does). A spec with stdin open is also
        attached on stdin: a warm pool container, which waits for its line there."""
        backend = self._backend
        await backend.ensure_watchdog()
        api, url = backend.client.api, backend.url
        try:
            self.id = await blocking(url, partial(backend.create_now, self._spec), self._spec.image)
            if self._spec.stdin_open:  # a warm container: the pool compares its image id
                attrs = await backend.inspect_container(self.id)
                self.image_id = str(attrs.get("Image", ""))
            # Attach before start so no byte of output is missed; the log driver is "none".
            # attach_socket hands us the socket itself, so we can shut it down and close it.
            streams = {"stdin": int(self._spec.stdin_open), "stdout": 1, "stderr": 1, "stream": 1}
            attached = await blocking(url, partial(api.attach_socket, self.id, params=streams))
            self._stream = AttachSocket(attached)
            await blocking(url, partial(api.start, self.id))
        except BaseException:
            await self._cleanup()
            raise

    async def send(self, data: bytes) -> None:
        """Write `data` to the container's stdin (attached only if the spec opened it)."""
        if self._stream is None:
            raise OSError("the container's stream is closed")
        try:
            await self._stream.send(data)
        except anyio.ClosedResourceError as exc:
            raise OSError("the container's stream is closed") from exc

    def ended(self) -> bool:
        """Whether the attach stream has anything to read, without reading it. A warm
        container writes nothing before its line comes: readable means it ended (EOF) or
        is not the blocked shell it should be. No engine call."""
        if self._stream is None:
            return True
        try:
            readable, _, _ = select.select([self._stream.raw], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def end(self, ok: bool) -> None:
        await self._cleanup()

    async def remove(self) -> None:
        """Close the stream and remove the container (shielded, idempotent)."""
        await self._cleanup()

    async def _cleanup(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._stream is not None:
                self._stream.close()
                self._stream = None
            if self.id:
                await self._backend.remove(self.id)

    async def output(self) -> AsyncIterator[bytes]:
        stream = self._stream
        if stream is None:
            return
        while True:
            try:
                frame = await stream.next_frame()
            except (OSError, anyio.ClosedResourceError):
                return  # the stream was closed under us (kill/remove): output is over
            if frame is None:
                return
            if frame[1]:
                yield frame[1]

    async def wait(self) -> ExitInfo:
        assert self.id
        return await exit_of(self._backend, self.id)

    async def kill(self) -> None:
        if not self.id:
            return
        kill = partial(self._backend.client.api.kill, self.id, signal="SIGKILL")
        with contextlib.suppress(CorralError):  # gone, or not running: nothing to kill
            await blocking(self._backend.url, kill)


async def exit_of(backend: DockerBackend, container_id: str) -> ExitInfo:
    """A container's exit once it has one: the engine's wait, then its state's OOM flag."""
    status = await blocking(backend.url, partial(backend.client.api.wait, container_id))
    state = (await backend.inspect_container(container_id)).get("State", {})
    return ExitInfo(
        exit_code=int(status.get("StatusCode", -1)),
        oom_killed=bool(state.get("OOMKilled", False)),
    )


class _DemuxedStream:
    """A hijacked engine connection (attach or exec, tty off): stdin written on the
    socket, stdout and stderr read back as the engine's multiplexed frames
    (`frames_iter`), stdout returned, stderr logged. Shared by DockerAttached and
    DockerExec so the demultiplexing lives in one place."""

    def __init__(self) -> None:
        self._stream: AttachSocket | None = None
        self.id = ""

    def _hold(self, sock: Any) -> None:
        self._stream = AttachSocket(sock)

    async def send(self, data: bytes) -> None:
        """Write without a thread and without blocking: a process that stops reading its
        stdin cannot hold a worker thread, and the caller's deadline cancels the wait."""
        if self._stream is None or self._stream.closed:
            raise OSError("the channel is closed")
        try:
            await self._stream.send(data)
        except anyio.ClosedResourceError as exc:
            raise OSError("the channel is closed") from exc

    async def receive(self) -> bytes | None:
        while True:
            stream = self._stream
            if stream is None:
                return None
            try:
                frame = await stream.next_frame()
            except (OSError, anyio.ClosedResourceError):
                return None  # the stream was closed under us: it is over
            if frame is None:
                return None
            kind, data = frame
            if kind == STDOUT:
                return bytes(data)
            for text in data.decode(errors="replace").splitlines():
                logger.debug("container %s: %s", self.id[:12], text)

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


class DockerAttached(_DemuxedStream):
    """A long-lived container attached on stdin/stdout before it starts (the kiosk agent's
    channel). `close` shuts the socket (waking a blocked reader) and removes the container."""

    def __init__(self, backend: DockerBackend, spec: ContainerSpec, *, stderr: bool = True) -> None:
        super().__init__()
        self._backend = backend
        self._spec = spec
        self._stderr = stderr

    async def open(self, before_start: Callable[[str], None] | None = None) -> None:
        """Create, attach (or listen on the channel's own socket: `channel_socket`) and
        start; with a socket, its main process's connection accepted before returning."""
        backend = self._backend
        await backend.ensure_watchdog()
        spec, listener = self._spec, None
        # (a spec that does not ask never costs the engine's `docker info`)
        if spec.channel_socket and channel_socket.fits(
            spec, backend.url, await backend.default_runtime(), enabled=backend.channel_socket
        ):
            listener = channel_socket.ChannelListener(backend.channel_folder.socket_path())
            spec = listener.spec_for(spec)

        def create() -> None:
            self.id = backend.create_now(spec)
            if listener is None:
                streams = {"stdin": 1, "stdout": 1, "stderr": int(self._stderr), "stream": 1}
                self._hold(backend.client.api.attach_socket(self.id, params=streams))
            if before_start is not None:
                before_start(self.id)
            backend.client.api.start(self.id)

        try:
            await blocking(backend.url, create, spec.image)
            if listener is not None:
                connection = await listener.accept(partial(backend.is_running, self.id))
                self._stream = channel_socket.SocketStream(connection)
        except BaseException:
            await self.close()
            raise
        finally:
            if listener is not None:
                listener.close()

    async def wait(self) -> ExitInfo:
        if not self.id:
            raise EngineNotFound("the container was removed")
        return await exit_of(self._backend, self.id)

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            self._close_stream()
            if self.id:
                container_id, self.id = self.id, ""
                await self._backend.remove(container_id)


EXEC_END_TIMEOUT = 5.0  # how long `DockerExec.close` waits to see the process gone


class DockerExec(_DemuxedStream):
    """A process run in a running container over the engine's exec API (stdin attached,
    tty off): `ExecStream`. Closing the socket closes the process's stdin; `close` then
    waits (bounded) until the engine reports the process ended."""

    def __init__(self, backend: DockerBackend, container_id: str) -> None:
        super().__init__()
        self._backend = backend
        self.container_id = container_id

    async def open(self, argv: Sequence[str], user: str) -> None:
        api = self._backend.client.api

        def start() -> None:
            created = api.exec_create(
                self.container_id,
                list(argv),
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                user=user,
            )
            self.id = str(created["Id"])
            self._hold(api.exec_start(self.id, detach=False, tty=False, socket=True))

        try:
            await blocking(self._backend.url, start)
        except BaseException:
            await self.close()
            raise

    async def running(self) -> bool:
        """Whether the engine still reports the process as running."""
        if not self.id:
            return False
        backend = self._backend
        state = await blocking(backend.url, partial(backend.client.api.exec_inspect, self.id))
        return bool(state.get("Running"))

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            self._close_stream()
            if not self.id:
                return
            with anyio.move_on_after(EXEC_END_TIMEOUT):
                while True:
                    try:
                        if not await self.running():
                            return
                    except CorralError:  # the container is gone: so is the process
                        return
                    await anyio.sleep(0.02)
            logger.warning(
                "exec %s in %s still runs after close", self.id[:12], self.container_id[:12]
            )
