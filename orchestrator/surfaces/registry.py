"""Every live surface of a gateway, in one registry: the seats the console lists and the
admin API acts on. Each surface manager (kiosk sessions, rigs) adds itself as a host;
oversight reads the seats from here, whatever their kind.

A seat is named one way (`Surface.seat`): its agent for a kiosk session (one per agent),
`AGENT.KIND` for a rig (`dee.desktop`, `ann.browser`): what `corral sessions list` shows
in its first column, and what `corral sessions takeover|handback|stop` and the console
take.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from orchestrator.errors import SeatError
from orchestrator.surfaces.base import Surface


class SurfaceHost(Protocol):
    """What holds surfaces: their list, and how one is ended."""

    def surfaces(self) -> Iterable[Surface]: ...

    async def end_surface(self, surface: Surface, why: str) -> None: ...


class Surfaces:
    def __init__(self) -> None:
        self.hosts: list[SurfaceHost] = []

    def add(self, host: SurfaceHost) -> None:
        if host not in self.hosts:
            self.hosts.append(host)

    def seats(self) -> dict[str, Surface]:
        """Every live surface by its seat name."""
        return {s.seat: s for host in self.hosts for s in host.surfaces()}

    def get(self, name: str) -> Surface:
        surface = self.seats().get(name)
        if surface is None:
            raise SeatError(
                f"{name!r} names no running session or rig (corral sessions list names them)"
            )
        return surface

    async def end(self, name: str, why: str) -> None:
        surface = self.get(name)
        for host in self.hosts:
            if any(s is surface for s in host.surfaces()):
                await host.end_surface(surface, why)
