"""What the console asks of the seats: the port the surfaces' oversight implements.

People sit below surfaces: the console and the admin API act on seats through this
Protocol, never on a surface type, so a new surface kind needs no change here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from orchestrator.audit import AuditLog
from orchestrator.people.approvals import ApprovalQueue
from orchestrator.people.timeline import TimelineEntry
from orchestrator.recordings.recorder import Recorder


class Seat(Protocol):
    """A surface a person can watch and take over, as the console sees it."""

    @property
    def timeline(self) -> Sequence[TimelineEntry]: ...

    @property
    def recorder(self) -> Recorder | None: ...


class SeatBoard(Protocol):
    """Every seat, and what an operator can do to one (keyed as `sessions_view` lists)."""

    audit: AuditLog
    approvals: ApprovalQueue

    def seats(self) -> Mapping[str, Seat]: ...

    def sessions_view(self) -> list[dict[str, Any]]: ...

    async def take_over(
        self, agent: str, operator: str, *, viewer: str | None, how: str
    ) -> None: ...

    async def hand_back(self, agent: str, operator: str) -> None: ...

    async def stop(self, agent: str, operator: str) -> None: ...

    async def viewer_input(
        self, agent: str, operator: str, viewer: str, *, take: bool = True
    ) -> bool: ...

    def viewer_left(self, agent: str, viewer: str) -> None: ...
