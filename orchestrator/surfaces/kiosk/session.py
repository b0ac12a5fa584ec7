"""A kiosk session as the gateway holds it, and the shape of a tool answer.

Shared by `sessions` (the handler), `screenshots` (the masked image) and `oversight`
(approvals, take over, the timeline)."""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from orchestrator.channel import KioskChannel
from orchestrator.config import ComputerUseConfig
from orchestrator.people.timeline import KEEP_ENTRIES
from sandboxes.ports import Egress
from sandboxes.session_rules import SessionClock

if TYPE_CHECKING:
    from orchestrator.people.approvals import Approval
    from orchestrator.people.timeline import TimelineEntry

Controller = Literal["ai", "human"]


@dataclass
class KioskSession:
    id: str
    agent: str
    width: int
    height: int
    clock: SessionClock
    allowed_domains: tuple[str, ...]
    deny_list: tuple[str, ...]
    channel: KioskChannel
    stack: contextlib.AsyncExitStack
    pinned: tuple[str, ...] = ()
    chromium_sandbox: bool = True
    egress: Egress | None = None
    started_at: float = 0.0  # wall clock, for the console
    controller: Controller = "ai"
    holder: str | None = None  # the operator who has the desktop, when controller is human
    holder_viewer: str | None = None  # the console connection whose input reaches it
    waiting: Approval | None = None  # the approval a held call waits for
    timeline: deque[TimelineEntry] = field(default_factory=lambda: deque(maxlen=KEEP_ENTRIES))
    needs_person: str | None = None  # shown in the console: why a person is asked for
    seat_count: int = 0  # how many times the seat changed hands
    seat_changed: anyio.Event = field(default_factory=anyio.Event)  # set at each change

    @property
    def used(self) -> int:
        return self.clock.used

    @property
    def max_actions(self) -> int:
        return self.clock.max_actions


def fresh_clock(cfg: ComputerUseConfig, now: float) -> SessionClock:
    """A session's (or a rig's) budget and timers, from its agent's computer_use_config."""
    return SessionClock(
        max_actions=cfg.max_actions,
        idle_timeout=cfg.idle_timeout_seconds,
        max_lifetime=cfg.max_lifetime_seconds,
        started=now,
        last_action=now,
    )


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def answer(*blocks: dict[str, Any], is_error: bool = False, **structured: Any) -> dict[str, Any]:
    return {"content": list(blocks), "is_error": is_error, "structured": structured or None}
