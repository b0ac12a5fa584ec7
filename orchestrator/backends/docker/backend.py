"""The Docker implementation of `ContainerBackend`, on the `docker` SDK.

Every SDK call is blocking, so each runs in a worker thread
(`orchestrator.backends.docker.sdk.blocking`); the event loop never waits on the
engine. Docker and requests exceptions are translated into `orchestrator.errors` in
one place, `sdk.map_docker_errors`. Nothing outside this package imports this module:
the rest of corral holds the backend as a `sandboxes.ports.ContainerBackend`, made by
`orchestrator.backends.choose.open_backend` from `[backend]`.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import docker
import requests.exceptions
from docker.models.containers import _create_container_args  # type: ignore[attr-defined]
from docker.utils.socket import frames_iter

from orchestrator.backends.docker.sdk import (
    blocking,
    connect,
    engine_url,
    map_docker_errors,
    probe_unix_socket,
)
from orchestrator.backends.docker.watchdog import OwnerWatchdog
from orchestrator.errors import CorralError, EngineConflict, EngineNotFound
from orchestrator.owner import LABEL_MANAGED, Owner
from sandboxes.ports import ContainerSpec, DoctorRow, EgressFactory, ExitInfo, ManagedContainer

if TYPE_CHECKING:
    from orchestrator.backends.docker.networks import SessionNetwork

logger = logging.getLogger("corral.docker")
STDOUT = 1


def create_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    """The SDK's `containers.create` keyword arguments for a spec (pure): the one place a
    ContainerSpec becomes engine arguments. Docker's `init` is never used: it would
    bind-mount the host's docker-init; images that need an init bring tini."""
    kwargs: dict[str, Any] = {
        "image": spec.image,
        "labels": dict(spec.labels),
        "user": spec.user,
        "read_only": spec.read_only,
        "mem_limit": spec.memory_bytes,
        "memswap_limit": spec.memory_swap_bytes,
        "pids_limit": spec.pids_limit,
        "nano_cpus": spec.nano_cpus,
        "cap_drop": list(spec.cap_drop),
        "security_opt": list(spec.security_opt),
        "tmpfs": dict(spec.tmpfs),
        "environment": dict(spec.environment),
        "log_config": (
            {"type": "json-file", "config": {"max-size": "1m", "max-file": "2"}}
            if spec.keep_logs
            else {"type": "none", "config": {}}
        ),
        "stdin_open": spec.stdin_open,
        "init": False,  # explicit: a daemon.json `init: true` would mount the host's binary
        "tty": False,
        "detach": True,
    }
    if spec.command is not None:
        kwargs["command"] = list(spec.command)
    # A named network is joined at create time (`network`); otherwise there is none.
    if spec.network is None:
        kwargs["network_mode"] = "none"
    else:
        kwargs["network"] = spec.network
    if spec.mounts:
        kwargs["volumes"] = {
            m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in spec.mounts
        }
    if spec.working_dir is not None:
        kwargs["working_dir"] = spec.working_dir
    if spec.name is not None:
        kwargs["name"] = spec.name
    if spec.shm_size_bytes is not None:
        kwargs["shm_size"] = spec.shm_size_bytes
    if spec.dns:
        kwargs["dns"] = list(spec.dns)
    if spec.runtime is not None:
        kwargs["runtime"] = spec.runtime
    return kwargs


class DockerBackend:
    """One engine connection shared by every call of this process:
    `sandboxes.ports.ContainerBackend` on Docker."""

    supports_pools = True

    def __init__(self, owner: Owner, docker_host: str | None = None) -> None:
        self.owner = owner
        self.url = engine_url(docker_host)
        self._client: docker.DockerClient | None = None
        self._watchdog = OwnerWatchdog(owner, self.url)

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect(self.url)
        return self._client

    def labels(self, *, kind: str, agent: str, session: str) -> dict[str, str]:
        return self.owner.labels(kind=kind, agent=agent, session=session)

    async def ensure_watchdog(self) -> None:
        """Start the owner watchdog (once) before the first container is created."""
        await anyio.to_thread.run_sync(self._watchdog.ensure_started)

    async def check(self, image: str) -> None:
        await anyio.to_thread.run_sync(probe_unix_socket, self.url)
        # An image lookup that answers proves the engine answers: no separate ping.
        await blocking(self.url, lambda: self.client.images.get(image), image)

    def start(self, spec: ContainerSpec) -> DockerRun:
        return DockerRun(self, spec)

    async def is_running(self, container_id: str) -> bool:
        """Whether the container exists and runs (one engine call)."""
        state = await self.inspect_container(container_id)
        return bool(state.get("State", {}).get("Running"))

    async def inspect_container(self, container_id: str) -> dict[str, Any]:
        """The engine's description of a container (one engine call)."""
        found: dict[str, Any] = await blocking(
            self.url, partial(self.client.api.inspect_container, container_id)
        )
        return found

    async def image_id(self, image: str) -> str:
        """The id of the image `image` names now (one engine call)."""
        found = await blocking(self.url, lambda: self.client.images.get(image), image)
        return str(found.id)

    async def list_managed(self, label_filters: Mapping[str, str]) -> list[ManagedContainer]:
        labels = [f"{LABEL_MANAGED}=true"] + [f"{k}={v}" for k, v in label_filters.items()]

        def run() -> list[ManagedContainer]:
            found = self.client.containers.list(
                ignore_removed=True, all=True, filters={"label": labels}
            )
            return [
                ManagedContainer(
                    id=c.id or "", name=c.name or "", status=c.status, labels=dict(c.labels)
                )
                for c in found
            ]

        return await blocking(self.url, run)

    async def open_attached(
        self,
        spec: ContainerSpec,
        *,
        before_start: Callable[[str], None] | None = None,
        stderr: bool = True,
    ) -> DockerAttached:
        """Create, attach (stdin, stdout and, unless `stderr` is False, stderr) and start.
        `before_start(container_id)` runs in between, in the worker thread (e.g. to connect
        the container to a second network). Attach no stream you will not keep reading
        while the container writes to it: an unread attach stream can stall the writer."""
        attached = DockerAttached(self, spec, stderr=stderr)
        await attached.open(before_start)
        return attached

    async def open_exec(self, container_id: str, argv: Sequence[str], *, user: str) -> DockerExec:
        """Start `argv` as `user` in a running container, stdin attached (tty off)."""
        stream = DockerExec(self, container_id)
        await stream.open(argv, user)
        return stream

    async def remove(self, container_id: str) -> None:
        await anyio.to_thread.run_sync(remove_and_wait, self.client, self.url, container_id)

    async def open_waiting(self, spec: ContainerSpec) -> DockerRun:
        """Create, attach (stdin too: the spec opens it) and start; `remove` removes it."""
        run = DockerRun(self, spec)
        await run.open()
        return run

    # The rest of the port lives in this package's other modules, imported when first
    # used: each of them builds on this one.
    async def prepare_network(self, agent: str) -> SessionNetwork:
        from orchestrator.backends.docker.networks import KIND_PROXY, new_session_id
        from orchestrator.backends.docker.networks import SessionNetwork as Network

        session_id = new_session_id()
        network = Network(self, session_id)
        await network.create(self.labels(kind=KIND_PROXY, agent=agent, session=session_id))
        return network

    def egress_factory(self, proxy_image: str) -> EgressFactory:
        from orchestrator.backends.docker.egress import docker_egress_factory

        return docker_egress_factory(self, proxy_image)

    async def reap_networks(self) -> list[str]:
        from orchestrator.backends.docker.network_reaper import reap_networks

        return list((await reap_networks(self)).networks)

    async def doctor_rows(self, image: str, runtime: str) -> list[DoctorRow]:
        from orchestrator.backends.docker.capacity import engine_rows

        return await engine_rows(self, image, runtime)

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self._watchdog.stop)
        if self._client is not None:
            self._client.close()


def remove_and_wait(client: docker.DockerClient, url: str, container_id: str) -> None:
    """Force-remove a container and return once it is gone (blocking). Gone already: fine.
    Another removal in progress (the engine answers 409): wait for that one to finish."""
    try:
        with map_docker_errors(url):
            client.api.remove_container(container_id, force=True, v=True)
    except EngineNotFound:
        return
    except EngineConflict:
        pass
    else:
        return  # a forced remove answers once the container is gone
    with contextlib.suppress(EngineNotFound), map_docker_errors(url):
        client.api.wait(container_id, condition="removed", timeout=30)


def _create(client: docker.DockerClient, spec: ContainerSpec) -> str:
    """`containers.create` without the inspect it makes afterwards (one engine round trip
    less per run): the same `create_kwargs`, through the SDK's own conversion."""
    kwargs = create_kwargs(spec)
    kwargs["version"] = client.api.api_version
    created = client.api.create_container(**_create_container_args(kwargs))
    return str(created["Id"])


def _close_socket(sock: Any) -> None:
    """Shut down (wakes a reader blocked in recv) and close an attach socket."""
    raw = getattr(sock, "_sock", sock)
    with contextlib.suppress(OSError):
        raw.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        raw.close()
    with contextlib.suppress(OSError):
        sock.close()


class DockerRun:
    """Create + attach + start on enter; force-remove on exit (shielded from cancellation)."""

    def __init__(self, backend: DockerBackend, spec: ContainerSpec) -> None:
        self._backend = backend
        self._spec = spec
        self._stream: Any = None
        self.id = ""
        self.image_id = ""

    async def __aenter__(self) -> DockerRun:
        await self.open()
        return self

    async def open(self) -> None:
        """Create, attach and start (what entering does). A spec with stdin open is also
        attached on stdin: a warm pool container, which waits for its line there."""
        backend = self._backend
        await backend.ensure_watchdog()
        api, url = backend.client.api, backend.url
        try:
            self.id = await blocking(
                url, partial(_create, backend.client, self._spec), self._spec.image
            )
            if self._spec.stdin_open:  # a warm container: the pool compares its image id
                attrs = await backend.inspect_container(self.id)
                self.image_id = str(attrs.get("Image", ""))
            # Attach before start so no byte of output is missed; the log driver is "none".
            # attach_socket hands us the socket itself, so we can shut it down and close it.
            streams = {"stdin": int(self._spec.stdin_open), "stdout": 1, "stderr": 1, "stream": 1}
            self._stream = await blocking(url, partial(api.attach_socket, self.id, params=streams))
            await blocking(url, partial(api.start, self.id))
        except BaseException:
            await self._cleanup()
            raise

    async def send(self, data: bytes) -> None:
        """Write `data` to the container's stdin (attached only if the spec opened it)."""
        if self._stream is None:
            raise OSError("the container's stream is closed")
        raw = getattr(self._stream, "_sock", self._stream)
        await anyio.to_thread.run_sync(raw.sendall, data)

    def ended(self) -> bool:
        """Whether the attach stream has anything to read, without reading it. A warm
        container writes nothing before its line comes: readable means it ended (EOF) or
        is not the blocked shell it should be. No engine call."""
        if self._stream is None:
            return True
        raw = getattr(self._stream, "_sock", self._stream)
        try:
            readable, _, _ = select.select([raw], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._cleanup()

    async def remove(self) -> None:
        """Close the stream and remove the container (shielded, idempotent)."""
        await self._cleanup()

    async def _cleanup(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._stream is not None:
                _close_socket(self._stream)
                self._stream = None
            if self.id:
                await self._backend.remove(self.id)

    async def output(self) -> AsyncIterator[bytes]:
        stream = self._stream
        if stream is None:
            return
        frames = frames_iter(stream, tty=False)  # type: ignore[no-untyped-call]
        iterator = (data for _, data in frames)
        while True:
            try:
                chunk = await anyio.to_thread.run_sync(
                    partial(next, iterator, None), abandon_on_cancel=True
                )
            except (requests.exceptions.RequestException, OSError, ValueError):
                return  # the stream was closed under us (kill/remove): output is over
            if chunk is None:
                return
            if chunk:
                yield chunk

    async def wait(self) -> ExitInfo:
        assert self.id
        backend = self._backend
        status = await blocking(backend.url, partial(backend.client.api.wait, self.id))
        state = (await backend.inspect_container(self.id)).get("State", {})
        return ExitInfo(
            exit_code=int(status.get("StatusCode", -1)),
            oom_killed=bool(state.get("OOMKilled", False)),
        )

    async def kill(self) -> None:
        if not self.id:
            return
        kill = partial(self._backend.client.api.kill, self.id, signal="SIGKILL")
        with contextlib.suppress(CorralError):  # gone, or not running: nothing to kill
            await blocking(self._backend.url, kill)


class _DemuxedStream:
    """A hijacked engine connection (attach or exec, tty off): stdin written on the
    socket, stdout and stderr read back as the engine's multiplexed frames
    (`frames_iter`), stdout returned, stderr logged. Shared by DockerAttached and
    DockerExec so the demultiplexing lives in one place."""

    def __init__(self) -> None:
        self._sock: Any = None
        self._frames: Iterator[tuple[int, bytes]] | None = None
        self.id = ""

    def _hold(self, sock: Any) -> None:
        self._sock = sock
        self._frames = frames_iter(sock, tty=False)  # type: ignore[no-untyped-call]

    def _raw(self) -> socket.socket:
        return getattr(self._sock, "_sock", self._sock)  # type: ignore[no-any-return]

    async def send(self, data: bytes) -> None:
        """Write without a thread and without blocking: a process that stops reading its
        stdin cannot hold a worker thread, and the caller's deadline cancels the wait."""
        if self._sock is None:
            raise OSError("the channel is closed")
        raw = self._raw()
        view = memoryview(data)
        while view:
            await anyio.wait_writable(raw)
            try:
                sent = raw.send(view, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            view = view[sent:]

    async def receive(self) -> bytes | None:
        while True:
            frames = self._frames
            if frames is None:
                return None
            try:
                frame = await anyio.to_thread.run_sync(
                    partial(next, frames, None), abandon_on_cancel=True
                )
            except (requests.exceptions.RequestException, OSError, ValueError):
                return None  # the stream was closed under us: it is over
            if frame is None:
                return None
            stream, data = frame
            if stream == STDOUT:
                return bytes(data)
            for text in data.decode(errors="replace").splitlines():
                logger.debug("container %s: %s", self.id[:12], text)

    def _close_stream(self) -> None:
        if self._sock is not None:
            _close_socket(self._sock)
            self._sock = None
            self._frames = None


class DockerAttached(_DemuxedStream):
    """A long-lived container attached on stdin/stdout before it starts (the kiosk agent's
    channel). `close` shuts the socket (waking a blocked reader) and removes the container."""

    def __init__(self, backend: DockerBackend, spec: ContainerSpec, *, stderr: bool = True) -> None:
        super().__init__()
        self._backend = backend
        self._spec = spec
        self._stderr = stderr

    async def open(self, before_start: Callable[[str], None] | None = None) -> None:
        backend = self._backend
        await backend.ensure_watchdog()

        def create() -> None:
            container = backend.client.containers.create(**create_kwargs(self._spec))
            self.id = container.id or ""
            streams = {"stdin": 1, "stdout": 1, "stderr": int(self._stderr), "stream": 1}
            self._hold(backend.client.api.attach_socket(self.id, params=streams))
            if before_start is not None:
                before_start(self.id)
            container.start()

        try:
            await blocking(backend.url, create, self._spec.image)
        except BaseException:
            await self.close()
            raise

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
