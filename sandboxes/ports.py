"""The ports the sandbox kinds need, for `orchestrator` to implement.

Above the backends, corral holds its engine only as a `ContainerBackend`: one, built
from `[backend]` by `orchestrator.backends.choose.open_backend` and handed to every
pool, surface and egress. Docker is the embedded default
(`orchestrator.backends.docker`), Kubernetes the scale-out path (SPEC S7,
`orchestrator.backends.kubernetes`); an in-memory backend (tests/fakes.py) runs the
session rules in unit tests. What a backend cannot do it refuses with `NotSupported`
(`supports_pools` says so ahead for the warm pools). Script runs, kiosk containers and the egress
proxy are all described by one `ContainerSpec`, built by `sandboxes.isolation`
(where every isolation limit is defined once).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class BindMount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """Everything needed to start one locked-down container. Built by
    `sandboxes.isolation.locked_down`, never by hand: the limits have no defaults here."""

    image: str
    command: tuple[str, ...] | None
    labels: Mapping[str, str]
    user: str
    network: str | None
    read_only: bool
    memory_bytes: int
    memory_swap_bytes: int
    pids_limit: int
    nano_cpus: int
    cap_drop: tuple[str, ...]
    security_opt: tuple[str, ...]
    tmpfs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[BindMount, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    name: str | None = None
    shm_size_bytes: int | None = None
    dns: tuple[str, ...] = ()
    stdin_open: bool = False
    keep_logs: bool = False  # False: no log driver (output is read over the attach stream)
    # The run's hard cap in seconds, when it has one (a script: SPEC S1.3's 600 s). Docker
    # enforces it inside the container (`timeout` as PID 1); Kubernetes also as the pod's
    # `activeDeadlineSeconds`.
    deadline_seconds: int | None = None
    runtime: str | None = None  # the engine's OCI runtime ("runc", "runsc"); None: its default
    # The main process takes its channel (stdin and stdout) on a unix socket named by
    # CORRAL_CHANNEL when the backend gives one (rig_images/channel_socket.py): the kiosk,
    # desktop and browser images. A backend may ignore it: the channel is the attach then.
    channel_socket: bool = False
    # Its CPU weight against the other containers (Docker's --cpu-shares; None: the engine's
    # 1024). A warm pool's member boots at a low weight, under the sessions' surfaces when
    # both want the CPU, and takes the normal one when claimed (`set_cpu_shares`).
    cpu_shares: int | None = None


@dataclass(frozen=True, slots=True)
class ExitInfo:
    exit_code: int
    oom_killed: bool


@dataclass(frozen=True, slots=True)
class ManagedContainer:
    id: str
    name: str
    status: str
    labels: Mapping[str, str]
    runs: bool = True  # a container (a pod), not an object that only goes with one


class RunningContainer(Protocol):
    """A started container whose merged output can be read. Removed when its context exits."""

    id: str

    def output(self) -> AsyncIterator[bytes]: ...

    async def wait(self) -> ExitInfo: ...

    async def kill(self) -> None: ...


class RunningContainerContext(Protocol):
    """`async with backend.start(spec) as running:` creates, attaches and starts the container;
    leaving the block force-removes it, shielded from cancellation."""

    async def __aenter__(self) -> RunningContainer: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class AttachedContainer(Protocol):
    """A started long-lived container whose stdin we write and whose stdout we read
    (the kiosk agent's channel). `close` removes the container."""

    id: str

    async def send(self, data: bytes) -> None:
        """Write to the container's stdin; OSError when the stream is closed."""

    async def receive(self) -> bytes | None:
        """The next chunk of its stdout (stderr is logged, not returned); None at the end."""

    async def wait(self) -> ExitInfo:
        """How its main process ended (the exit code; whether the engine killed it for
        memory), once it has; callers bound the wait."""

    async def close(self) -> None:
        """Close the streams and remove the container (idempotent, shielded)."""


class ExecStream(Protocol):
    """A process started in a running container, its stdin and stdout a binary duplex
    stream (tty off; stderr is logged, not returned). Ends when the process exits or
    `close` is called; `close` ends the process (its stdin closes) and never removes the
    container."""

    id: str  # the exec's id

    async def send(self, data: bytes) -> None:
        """Write to the process's stdin; OSError when the stream is closed."""

    async def receive(self) -> bytes | None:
        """The next chunk of its stdout; None once the process has ended it."""

    async def close(self) -> None:
        """Close the stream: the process sees its stdin end (idempotent, shielded)."""


class WaitingContainer(Protocol):
    """A started container held on its stdin (a warm script container): created, attached
    and started by `ContainerBackend.open_waiting`; told what to do with `send`, then read
    like a `RunningContainer`. `remove` removes it (shielded, idempotent)."""

    id: str
    image_id: str  # the id of the image it was created from

    async def send(self, data: bytes) -> None: ...

    def ended(self) -> bool:
        """Whether it has ended (or written before its line came): no engine call."""

    def output(self) -> AsyncIterator[bytes]: ...

    async def wait(self) -> ExitInfo: ...

    async def kill(self) -> None: ...

    async def remove(self) -> None: ...


class PreparedNetwork(Protocol):
    """A session network made ahead of its session (a warm pool's): a kiosk or rig starts
    on it with no way out; a claim pins the proxy made with it (or brings one), or the
    surface leaves it (`disconnect`) and the network is removed."""

    session_id: str

    @property
    def name(self) -> str: ...

    @property
    def gateway(self) -> str | None:
        """The address the kiosk asks for names (its DNS server), if any."""

    @property
    def proxy_url(self) -> str:
        """Where a kiosk on it finds the session's proxy once one joins."""

    async def disconnect(self, container_id: str) -> None: ...

    async def remove(self, *, raise_errors: bool = True) -> None: ...


DoctorRow = tuple[str, bool, str]  # (check, ok, detail) for `corral doctor`


class ContainerBackend(Protocol):
    supports_pools: bool  # warm pools (scripts, kiosks, rigs): `open_waiting`, `prepare_network`

    def labels(self, *, kind: str, agent: str, session: str) -> dict[str, str]:
        """The `corral.*` labels that mark a container as this process's (SPEC S0)."""

    async def check(self, image: str) -> None:
        """Raise SandboxUnavailable unless the engine answers and `image` is present."""

    def start(self, spec: ContainerSpec) -> RunningContainerContext: ...

    async def open_attached(self, spec: ContainerSpec) -> AttachedContainer:
        """Create, attach to stdin/stdout and start a container; the caller closes it."""

    async def open_exec(self, container_id: str, argv: Sequence[str], *, user: str) -> ExecStream:
        """Run `argv` as `user` in a running container with stdin attached; the caller
        closes the stream. No port and no mount: the bytes travel over the engine's API."""

    async def list_managed(self, label_filters: Mapping[str, str]) -> list[ManagedContainer]: ...

    async def remove(self, container_id: str) -> None:
        """Force-remove and wait until it is gone; a container already gone is not an error."""

    async def is_running(self, container_id: str) -> bool:
        """Whether the container exists and runs."""

    async def set_cpu_shares(self, container_id: str, shares: int) -> None:
        """Give a running container another CPU weight (`ContainerSpec.cpu_shares`)."""

    async def memory_bytes(self, container_id: str) -> int | None:
        """The memory the container holds now (its working set), or None if unknown."""

    async def image_id(self, image: str) -> str:
        """The id of the image `image` names now (a changed id makes warm containers stale)."""

    async def open_waiting(self, spec: ContainerSpec) -> WaitingContainer:
        """Create, attach (stdin too) and start a container that waits for its line."""

    async def prepare_network(
        self, agent: str, proxy_image: str | None = None, prefix: str = ""
    ) -> PreparedNetwork:
        """A fresh session network with no way out, owned by `agent` (labels), its id
        starting with `prefix`; with `proxy_image`, its egress proxy started ahead, armed
        (no pins until the claim's egress pins it)."""

    def egress_factory(self, proxy_image: str) -> EgressFactory:
        """Sessions' ways out on this backend, their proxies made from `proxy_image`."""

    async def reap_networks(self) -> list[str]:
        """Remove the session networks (and what guards them) whose owner is gone; their
        names. Only what `remove` of the containers leaves behind."""

    async def doctor_rows(
        self, image: str, runtime: str, audit: AuditSink | None = None
    ) -> list[DoctorRow]:
        """`corral doctor`'s rows for this backend: the engine, the image, capacity; it
        reaps orphans as it goes (each audited in `audit`). An unreachable engine is a
        failing row, not an error."""

    async def close(self) -> None:
        """Close the connection (the runtime does, once, when the process ends)."""


class WarmScript(Protocol):
    """A claimed warm pool container (issue 14): created ahead with the S1.2 spec and an
    empty private workspace, blocked until told which script to run. Used once."""

    workspace: str  # the host directory mounted read-only at /workspace; write the script here
    session: str  # its `corral.session` label

    def run(
        self, language: str, hard_cap_seconds: int, exit_mark: str
    ) -> AbstractAsyncContextManager[RunningContainer]:
        """`async with claimed.run(language, cap, mark) as running:` starts the script (its
        hard cap counted from now, its exit line marked `mark`); leaving the block removes
        the container and the workspace, shielded. A claimed container that is never run
        is removed with `discard`."""

    async def discard(self) -> None:
        """Remove the container and its workspace without running it (idempotent)."""


class ScriptPool(Protocol):
    """K script containers created ahead, refilled in the background (issue 14)."""

    async def claim(self) -> WarmScript | None:
        """A live container of the current image, or None (empty, or every idle one was
        stale): the caller takes the cold path. Never a container that died or whose image
        id is no longer the configured image's."""


class Slots(Protocol):
    """How many scripts may run at once: `async with slots.slot():` holds one, or raises
    SandboxBusy when none comes within the configured bounds."""

    def slot(self) -> AbstractAsyncContextManager[None]: ...


class AuditSink(Protocol):
    """Where the sandbox kinds write audit events (`orchestrator.audit.AuditLog`)."""

    def record(self, event: str, agent: str | None, details: Mapping[str, Any]) -> None: ...


class Egress(Protocol):
    """A session's way out, as the session layer needs to know it (SPEC S2.6)."""

    @property
    def network_name(self) -> str | None: ...

    @property
    def proxy_url(self) -> str | None: ...

    @property
    def pins(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def left_out(self) -> Mapping[str, str]:
        """Allowlisted hosts that got no pin, each with why (no answer, loopback, ...)."""

    @property
    def dns_servers(self) -> list[str]: ...

    async def restrict(self, hosts: Sequence[str]) -> None:
        """Keep only `hosts` of the pinned ones: the others lose their route out (and their
        open tunnels) now. Never adds a host."""

    async def check(self) -> str | None:
        """Why the session's proxy is gone (asked over its control channel, bounded), or
        None while it answers (or there is none). A surface whose navigation failed asks."""


# `factory(session_id=..., agent=..., allowed=(...), overrides={...}, network=None)`: a
# session's way out, entered before its kiosk or rig starts and left after it is removed.
EgressFactory = Callable[..., AbstractAsyncContextManager[Egress]]
