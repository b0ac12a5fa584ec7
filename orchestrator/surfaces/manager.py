"""What every surface manager holds (the kiosk sessions' and the rigs'): where surfaces
start (home, config, engine, egress), the audit, the clock, the seats they are listed in
and the one action pipeline their inputs pass."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass

import anyio

from orchestrator.audit import AuditLog
from orchestrator.config import CorralConfig
from orchestrator.errors import CorralError
from orchestrator.home import CorralHome
from orchestrator.recordings.service import Recordings
from orchestrator.surfaces.base import Surface
from orchestrator.surfaces.heap import give_back
from orchestrator.surfaces.oversight import Oversight
from orchestrator.surfaces.pipeline import Pipeline
from orchestrator.surfaces.start import Host
from sandboxes.ports import ContainerBackend, EgressFactory

logger = logging.getLogger("corral.surfaces")


@dataclass(eq=False)
class SurfaceManager:
    """The base of `SessionManager` and `RigManager`. With `oversight` (the gateway's),
    the manager adds itself to its seats registry; without, `own_oversight` decides (a
    kiosk manager makes seats of its own, a rig manager has none: no approver)."""

    home: CorralHome
    config: CorralConfig
    backend: ContainerBackend
    audit: AuditLog
    egress_factory: EgressFactory
    _: KW_ONLY
    clock: Callable[[], float] = time.monotonic
    oversight: Oversight | None = None
    recordings: Recordings | None = None  # the gateway's; None: nothing is recorded

    def __post_init__(self) -> None:
        self.host = Host(self.config, self.backend, self.egress_factory)
        self.oversight = self.oversight or self.own_oversight()
        self.pipeline = Pipeline(self.audit, self.oversight, self.clock)
        if self.oversight is not None:
            self.oversight.surfaces.add(self)
        self.setup()

    def own_oversight(self) -> Oversight | None:
        """The seats of a manager given none (run on its own: tests, tools)."""
        return None

    def setup(self) -> None:
        """The kind's own state, made once the common part is."""

    def surfaces(self) -> Sequence[Surface]:
        """This manager's live surfaces (each kind's own)."""
        raise NotImplementedError

    async def end_surface(self, surface: Surface, why: str) -> None:
        raise NotImplementedError

    def record(self, surface: Surface) -> None:
        """Start recording a surface that has just started, from its first frame."""
        if self.recordings is None:
            return
        surface.recorder = self.recordings.begin(surface)
        if surface.recorder is not None:
            surface.recorder.poke()

    async def unrecord(self, surface: Surface, why: str) -> None:
        """The surface ends: its recording ends first, with a last frame of the surface as
        it was left unless its channel failed (no frame of a closing surface)."""
        if self.recordings is not None:
            await self.recordings.end(surface.recorder, why, last=not surface.broken)

    async def removed(self, surface: Surface) -> dict[str, str]:
        """Close `surface` (its containers, network, proxy); what failed, for its end's
        audit line ({} when nothing did). A removal the engine refused is not the call's
        failure: the surface has ended either way, and the owner watchdog and `corral
        reap` remove what is left."""
        try:
            await surface.close()
        except CorralError as exc:
            logger.warning("%s %s: its removal failed (%s)", surface.kind, surface.id, exc)
            return {"removal_failed": str(exc)[:300]}
        finally:
            with anyio.CancelScope(shield=True):
                await give_back()  # what it and its recording freed: not kept at the peak
        return {}
