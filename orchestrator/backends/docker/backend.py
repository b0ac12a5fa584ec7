"""The Docker implementation of `ContainerBackend`, on the `docker` SDK.

Every SDK call is blocking, so each runs in a worker thread
(`orchestrator.backends.docker.sdk.blocking`); the event loop never waits on the
engine. Docker and requests exceptions are translated into `orchestrator.errors` in
one place, `sdk.map_docker_errors`. Nothing outside this package imports this module:
the rest of corral holds the backend as a `sandboxes.ports.ContainerBackend`, made by
`orchestrator.backends.choose.backend_for` from `[backend]`. Its containers are
`containers`', a spec's engine arguments `spec.create_kwargs`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import docker

from orchestrator.backends.docker.channel_socket import ChannelFolder, default_runtime_of
from orchestrator.backends.docker.containers import DockerAttached, DockerExec, DockerRun
from orchestrator.backends.docker.sdk import (
    DEFAULT_SOCKET,
    blocking,
    connect,
    map_docker_errors,
    probe_unix_socket,
)
from orchestrator.backends.docker.spec import create_container
from orchestrator.backends.docker.watchdog import OwnerWatchdog
from orchestrator.backends.owner import LABEL_MANAGED, Owner
from orchestrator.errors import EngineConflict, EngineError, EngineNotFound
from sandboxes.ports import (
    AuditSink,
    ContainerSpec,
    DoctorRow,
    EgressFactory,
    ManagedContainer,
)

if TYPE_CHECKING:
    from orchestrator.backends.docker.networks import SessionNetwork


PROXY_READY_SECONDS = 30.0  # an armed proxy made ahead (prepare_network)


class DockerBackend:
    """One engine connection shared by every call of this process:
    `sandboxes.ports.ContainerBackend` on Docker."""

    supports_pools = True

    def __init__(
        self,
        owner: Owner,
        url: str = DEFAULT_SOCKET,
        audit_file: Path | None = None,
        *,
        channel_socket: bool = True,
    ) -> None:
        """`url`: the engine, as `backends.docker.build` resolved it (`engine_url`);
        `audit_file`: where the owner watchdog audits what a dead owner left;
        `channel_socket`: `[backend] channel_socket` (False: every channel on the attach)."""
        self.owner = owner
        self.url = url
        self._client: docker.DockerClient | None = None
        self._watchdog = OwnerWatchdog(owner, self.url, audit_file)
        self.channel_socket = channel_socket
        self._default_runtime: str | None = None
        self.channel_folder = ChannelFolder()  # the channels' own sockets (channel_socket)

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

    def create_now(self, spec: ContainerSpec) -> str:
        """Create (not start) a container of `spec`, blocking: call it in a worker thread.
        The owner watchdog knows the create is in flight until the engine answered it, so
        a create this process sent just before it died is removed when it lands."""
        with self._watchdog.creating() as labels:
            return create_container(self.client, spec, labels)

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

    async def set_cpu_shares(self, container_id: str, shares: int) -> None:
        """Its cgroup's CPU weight now (one engine call: `docker update --cpu-shares`)."""
        await blocking(
            self.url, lambda: self.client.api.update_container(container_id, cpu_shares=shares)
        )

    async def memory_bytes(self, container_id: str) -> int | None:
        """Its cgroup's memory use less the inactive page cache (what `docker stats` shows),
        from one one-shot stats call; None if the engine says nothing: the container is
        gone, is being removed (the engine answers 200 with an empty body then), or
        its stats have no memory figure."""

        def one_shot() -> dict[str, Any]:
            try:
                found = self.client.api.stats(container_id, stream=False, one_shot=True)
            except ValueError:  # requests' JSONDecodeError: an empty body mid-removal
                return {}
            return found if isinstance(found, dict) else {}

        try:
            stats = await blocking(self.url, one_shot)
        except (EngineNotFound, EngineConflict):
            return None
        memory = stats.get("memory_stats") or {}
        usage = memory.get("usage")
        if not isinstance(usage, int):
            return None
        detail = memory.get("stats") or {}
        inactive = detail.get("inactive_file", detail.get("total_inactive_file", 0))
        return usage - int(inactive)

    async def default_runtime(self) -> str:
        """The engine's default OCI runtime (`docker info`'s DefaultRuntime), asked once."""
        if self._default_runtime is None:
            info: dict[str, Any] = await blocking(self.url, self.client.info)
            self._default_runtime = default_runtime_of(info)
        return self._default_runtime

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
    async def prepare_network(
        self, agent: str, proxy_image: str | None = None, prefix: str = ""
    ) -> SessionNetwork:
        from orchestrator.backends.docker.networks import KIND_PROXY, new_session_id
        from orchestrator.backends.docker.networks import SessionNetwork as Network

        session_id = prefix + new_session_id()[len(prefix) :]
        network = Network(self, session_id)
        labels = self.labels(kind=KIND_PROXY, agent=agent, session=session_id)
        await network.create(labels)
        if proxy_image is not None:
            try:
                await network.arm(proxy_image, labels, PROXY_READY_SECONDS)
            except BaseException:
                await network.remove(raise_errors=False)
                raise
        return network

    def egress_factory(self, proxy_image: str) -> EgressFactory:
        from orchestrator.backends.docker.egress import docker_egress_factory

        return docker_egress_factory(self, proxy_image)

    async def reap_networks(self) -> list[str]:
        from orchestrator.backends.docker.network_reaper import reap_networks

        return list((await reap_networks(self)).networks)

    async def doctor_rows(
        self, image: str, runtime: str, audit: AuditSink | None = None
    ) -> list[DoctorRow]:
        from orchestrator.backends.docker.capacity import engine_rows

        return await engine_rows(self, image, runtime, audit)

    async def close(self) -> None:
        self.channel_folder.remove()
        await anyio.to_thread.run_sync(self._watchdog.stop)
        if self._client is not None:
            self._client.close()


# The engine's answer when a forced remove's kill meets the container's own exit (dockerd
# 20.10: "Could not kill running container X, cannot remove - Container X is not
# running"): it has stopped by then, and the same remove again removes it.
EXITED_DURING_KILL = "is not running"
REMOVE_TRIES = 3


def remove_and_wait(client: docker.DockerClient, url: str, container_id: str) -> None:
    """Force-remove a container and return once it is gone (blocking). Gone already: fine.
    Another removal in progress (the engine answers 409): wait for that one to finish. The
    container exiting while the remove killed it: remove it again."""
    for attempt in range(REMOVE_TRIES):
        try:
            with map_docker_errors(url):
                client.api.remove_container(container_id, force=True, v=True)
        except EngineNotFound:
            return
        except EngineConflict:
            break
        except EngineError as exc:
            if EXITED_DURING_KILL not in str(exc) or attempt == REMOVE_TRIES - 1:
                raise
            continue
        return  # a forced remove answers once the container is gone
    with contextlib.suppress(EngineNotFound), map_docker_errors(url):
        client.api.wait(container_id, condition="removed", timeout=30)
