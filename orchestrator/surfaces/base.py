"""What every surface is (issue 21): a kiosk session, a desktop, browser, Android or iOS
rig. Each kind is this type plus its driver (what click, type, key, screenshot mean
there) and its start recipe; the bookkeeping below is written once.

- who and what: `id` (the seat's name in the console and `corral sessions`), `agent`,
  `kind` (kiosk, desktop, browser, android, ios), the screen's `width` x `height`;
- the rules it runs under: `clock` (budget, idle timeout, lifetime), the allowlist, the
  deny list, the hosts pinned at its start and its `egress` (None: no network of ours);
- the seat (`controller`, `holder`, `holder_viewer`, `waiting`, `needs_person`, how often
  it changed hands), guarded by `lock`; the `timeline` the console shows;
- its state: `broken` (why its channel failed, or None) and `state`.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

import anyio

from orchestrator.backends.channel import KioskChannel
from orchestrator.config import ComputerUseConfig
from orchestrator.errors import SurfaceGone
from orchestrator.people.timeline import KEEP_ENTRIES
from orchestrator.recordings.recorder import Frame, Recorder
from orchestrator.recordings.use import AiUse
from sandboxes.ports import Egress
from sandboxes.session_rules import SessionClock

if TYPE_CHECKING:
    from orchestrator.people.approvals import Approval
    from orchestrator.people.timeline import TimelineEntry

Controller = Literal["ai", "human"]
CLEAR_DEADLINE = 5.0  # the agent's clipboard_clear at hand back


@dataclass(kw_only=True)
class Surface:
    kind: ClassVar[str] = "surface"

    id: str
    agent: str
    clock: SessionClock
    width: int = 0
    height: int = 0
    allowed_domains: tuple[str, ...] = ()
    deny_list: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    egress: Egress | None = None
    egress_gone: str | None = None  # why its egress proxy is gone (the surface ends then)
    stack: contextlib.AsyncExitStack | None = None  # what its start opened, closed at its end
    started_at: float = 0.0  # wall clock, for the console
    # The seat (orchestrator.surfaces.oversight): who has the screen, and since when.
    controller: Controller = "ai"
    holder: str | None = None  # the operator who has it, when controller is human
    holder_viewer: str | None = None  # the console connection whose input reaches it
    waiting: Approval | None = None  # the approval a held call waits for
    needs_person: str | None = None  # shown in the console: why a person is asked for
    seat_count: int = 0  # how many times the seat changed hands
    seat_changed: anyio.Event = field(default_factory=anyio.Event)  # set at each change
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one input at a time
    timeline: deque[TimelineEntry] = field(default_factory=lambda: deque(maxlen=KEEP_ENTRIES))
    # The MCP conversation a rig belongs to ("" for none; a kiosk session is the agent's).
    conversation: str = ""
    seat_suffix: str = ""  # see `seat`
    # Told to its agent with the first answer: why the surface this one replaced ended
    # (ended between two calls, by its idle timeout or a failure found meanwhile).
    notice: str | None = None
    # Its recording (orchestrator.recordings), None when it is not recorded.
    recorder: Recorder | None = None
    # When the AI's calls use it (held by the pipeline): its recorder's frames and its
    # timeline's thumbnails are not taken meanwhile.
    use: AiUse = field(default_factory=AiUse)

    @property
    def seat(self) -> str:
        """The seat's one name (orchestrator.surfaces.registry): a kiosk session is its
        agent's only one, so its agent; a rig `AGENT.KIND` (agent names have no dot), or,
        while another conversation of the agent holds that name, `AGENT.KIND-XXXXXX` (its
        conversation id's first hex digits; `seat_suffix`, fixed at its start)."""
        if self.kind == "kiosk":
            return self.agent
        return f"{self.agent}.{self.kind}{self.seat_suffix}"

    @property
    def broken(self) -> str | None:
        """Why the surface's channel or its egress proxy failed (it ends at the next call),
        or None."""
        return self.egress_gone

    def failure(self, channel: str) -> str:
        """What ended a broken surface, for its answer and the audit: its egress proxy, or
        (`channel`: how its manager names it) its channel."""
        if self.egress_gone:
            return f"its egress proxy failed ({self.egress_gone})"
        return f"{channel} failed ({self.broken})"

    @property
    def state(self) -> str:
        return "broken" if self.broken else "ready"

    def summary(self, now: float, approval: str | None = None) -> dict[str, Any]:
        """The state every action's structured content carries (`sandboxes.results.
        SurfaceState`): the surface, its seat, its budget and clocks, and the approval the
        action ran under."""
        idle, life = self.clock.time_left(now)
        return {
            "surface": self.kind,
            "surface_id": self.id,
            "controller": self.controller,
            "actions_used": self.clock.used,
            "max_actions": self.clock.max_actions,
            "idle_seconds_left": idle,
            "lifetime_seconds_left": life,
            "approval": approval,
        }

    def status(self, now: float) -> str:
        """The budget and timers line every answer ends with."""
        return self.clock.status_line(now)

    def ai_holds(self) -> bool:
        """Whether the AI has the seat: asked under `lock` right before each input."""
        return self.controller == "ai"

    async def settled(self) -> None:
        """Wait until no input of the AI's is in flight (the lock is free). Called after a
        take over has set the seat: once it returns, no input of the AI's lands."""
        async with self.lock:
            pass

    async def frame(self) -> Frame:
        """The masked screen now, for its recording: the screenshot tool's own masking
        (each kind with a screen says how)."""
        raise NotImplementedError

    async def forget_clipboard(self) -> None:
        """Clear what a person may have copied (clipboard, primary selection), at hand
        back; a surface with no clipboard the AI can read has nothing to clear."""

    def moved(self) -> None:
        """The seat changed hands: count it and wake whoever waits for a change."""
        self.seat_count += 1
        self.seat_changed.set()
        self.seat_changed = anyio.Event()

    async def follow(self, cfg: ComputerUseConfig) -> list[str]:
        """Apply the agent's current allowlist and deny list from the next call. A host
        removed from the allowlist also loses its route through the proxy now (open
        tunnels closed); one added since the start is not pinned (restart to get it).
        The hosts that lost their route, for the audit (empty: none)."""
        self.allowed_domains = tuple(cfg.allowed_domains)
        self.deny_list = tuple(cfg.deny_list)
        kept = tuple(h for h in self.pinned if h in self.allowed_domains)
        if kept == self.pinned or self.egress is None:
            return []
        removed = sorted(set(self.pinned) - set(kept))
        await self.egress.restrict(kept)
        self.pinned = kept
        return removed

    async def close(self) -> None:
        """Remove what the start made (containers, network, proxy), even when cancelled."""
        if self.stack is not None:
            with anyio.CancelScope(shield=True):
                await self.stack.aclose()


@dataclass(kw_only=True)
class ChannelSurface(Surface):
    """A surface driven over an agent channel (`orchestrator.backends.channel.KioskChannel`): the
    kiosk and the desktop rig, whose screenshots are masked the same way
    (`orchestrator.surfaces.screenshots`). A broken channel is a broken surface."""

    channel: KioskChannel
    # How long a screenshot (or a recording frame) may take before the agent is taken for
    # stuck and the surface ends: past its own bounded probes, grab and PNG, with room for
    # a loaded host (tests/unit/test_kiosk_budgets.py holds each agent's bounds under it).
    # A hung agent is caught sooner: its heartbeat goes silent (KioskChannel).
    screenshot_deadline: ClassVar[float] = 5.0
    # The last recording frame taken over the channel: what its pixels were (the agent's
    # digest), the deny list it was masked under, and the frame (orchestrator.surfaces.
    # screenshots.channel_frame).
    last_frame: tuple[str, tuple[str, ...], Frame] | None = None

    @property
    def broken(self) -> str | None:
        return self.egress_gone or self.channel.broken

    async def forget_clipboard(self) -> None:
        """Both X selections (CLIPBOARD, PRIMARY) owned by nobody, at hand back: what a
        person copied during a take over is theirs, never pasted or read by the AI after
        it (the agent's `clipboard_clear`, the same op on the kiosk and the desktop)."""
        await self.channel.request("clipboard_clear", CLEAR_DEADLINE)


def fresh_clock(cfg: ComputerUseConfig, now: float) -> SessionClock:
    """A surface's budget and timers, from its agent's computer_use_config."""
    return SessionClock(
        max_actions=cfg.max_actions,
        idle_timeout=cfg.idle_timeout_seconds,
        max_lifetime=cfg.max_lifetime_seconds,
        started=now,
        last_action=now,
    )


class Opening(TypedDict):
    """What every surface is started with (`Surface(**opened(...), ...)`): its id and
    agent, its clock, the agent's lists and, with egress, the hosts pinned at the start."""

    id: str
    agent: str
    clock: SessionClock
    allowed_domains: tuple[str, ...]
    deny_list: tuple[str, ...]
    pinned: tuple[str, ...]
    egress: Egress | None
    started_at: float


def opened(
    surface_id: str, agent: str, cfg: ComputerUseConfig, now: float, egress: Egress | None = None
) -> Opening:
    """The fields every start recipe fills the same way (`now`: the manager's clock)."""
    return Opening(
        id=surface_id,
        agent=agent,
        clock=fresh_clock(cfg, now),
        allowed_domains=tuple(cfg.allowed_domains),
        deny_list=tuple(cfg.deny_list),
        pinned=() if egress is None else tuple(sorted(egress.pins)),
        egress=egress,
        started_at=time.time(),
    )


async def proxy_alive(surface: Surface, what: str) -> None:
    """After a navigation failed: a surface whose egress proxy is gone ends (SurfaceGone
    names why; its manager ends it), since the failure was the proxy's and every later
    one would be too. Nothing went around the proxy: it is the surface's only route out."""
    if surface.egress is None:
        return
    gone = await surface.egress.check()
    if gone:
        surface.egress_gone = gone
        raise SurfaceGone(f"{what}, and nothing left the {surface.kind}: its egress proxy is gone.")
