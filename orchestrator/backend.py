"""The container backend seam.

The supervisor talks to containers only through `ContainerBackend`. Docker is
the embedded default (`orchestrator.docker_backend`); a Kubernetes backend is
the scale-out path (SPEC S7) and implements the same Protocol.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol


@dataclass(frozen=True, slots=True)
class BindMount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """Everything needed to start one locked-down container. Built by pure policy code."""

    image: str
    command: tuple[str, ...]
    labels: Mapping[str, str]
    user: str
    network: str = "none"
    read_only: bool = True
    memory_bytes: int = 2 * 1024**3
    memory_swap_bytes: int = 2 * 1024**3
    pids_limit: int = 256
    nano_cpus: int = 1_000_000_000
    cap_drop: tuple[str, ...] = ("ALL",)
    security_opt: tuple[str, ...] = ("no-new-privileges",)
    tmpfs: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[BindMount, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    working_dir: str = "/"
    init: bool = True


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


class RunningContainer(Protocol):
    """A started container whose merged output can be read. Removed when its context exits."""

    id: str

    def output(self) -> AsyncIterator[bytes]: ...

    async def wait(self) -> ExitInfo: ...

    async def kill(self) -> None: ...


class ContainerBackend(Protocol):
    async def check(self, image: str) -> None:
        """Raise SandboxUnavailable unless the engine answers and `image` is present."""

    def start(self, spec: ContainerSpec) -> RunningContainerContext: ...

    async def list_managed(self, label_filters: Mapping[str, str]) -> list[ManagedContainer]: ...

    async def remove(self, container_id: str) -> None:
        """Force-remove; a container that is already gone is not an error."""


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
