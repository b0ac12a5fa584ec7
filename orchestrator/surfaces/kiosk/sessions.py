"""Kiosk sessions (SPEC S2.3-S2.7): the gateway's handler for the computer_* tools.

The gateway performs every check itself (the MCP front only forwards): the
agent's capability and permissions, the parameters, the action budget, the
URL policy, the session's idle timeout and lifetime. One session per agent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.agents.view import agent_and_view
from orchestrator.backends.admission import boot_slot
from orchestrator.config import ComputerUseConfig
from orchestrator.errors import CorralError, KioskError, ParamError, SessionRefused
from orchestrator.people.approvals import ApprovalQueue
from orchestrator.surfaces.answers import Answer, answer, fit_width, text_block, with_state
from orchestrator.surfaces.base import Surface, opened
from orchestrator.surfaces.kiosk.driver import KioskDriver
from orchestrator.surfaces.kiosk.session import KioskSession
from orchestrator.surfaces.kiosk.start import KioskStart, Started
from orchestrator.surfaces.manager import SurfaceManager
from orchestrator.surfaces.oversight import Oversight
from orchestrator.surfaces.pipeline import Action
from orchestrator.surfaces.registry import Surfaces
from orchestrator.surfaces.screenshots import masked_screenshot
from orchestrator.surfaces.start import (
    navigable_sites,
    no_egress,
)
from sandboxes.approval_rules import describe_rules
from sandboxes.catalogue import BY_NAME, RIG_TOOLS
from sandboxes.events import NO_EVENTS, CallEvents
from sandboxes.params import SessionStartParams, SessionStopParams, validate
from sandboxes.ports import EgressFactory
from sandboxes.session_rules import COUNTED
from sandboxes.step_text import step_of
from sandboxes.visibility import AgentView, decide

if TYPE_CHECKING:
    from orchestrator.pools.kiosks import KioskPool

logger = logging.getLogger("corral.sessions")


Clock = Callable[[], float]


class SessionManager(SurfaceManager):
    """Kiosk sessions, one per agent. `kiosk_pool` (`[container.kiosk] warm`,
    orchestrator/pools/kiosks.py) is set by the gateway after construction."""

    oversight: Oversight
    kiosk_pool: KioskPool | None = None

    def own_oversight(self) -> Oversight:
        queue = ApprovalQueue(self.audit, self.config.approvals.timeout_seconds)
        return Oversight(Surfaces(), self.audit, queue, clock=self.clock)

    def setup(self) -> None:
        self.approvals = self.oversight.approvals
        self.sessions: dict[str, KioskSession] = {}
        self.ended: dict[str, str] = {}  # agent -> why its last session ended
        self._starting: set[str] = set()

    def surfaces(self) -> list[KioskSession]:
        return list(self.sessions.values())

    async def end_surface(self, surface: Surface, why: str) -> None:
        await self.end(surface.agent, why)

    # ------------------------------------------------------------------ handler
    async def handle(
        self, agent: str, tool: str, arguments: dict[str, Any], events: CallEvents = NO_EVENTS
    ) -> Answer:
        """The gateway's computer-use handler: every check, then the action. `events` hears
        the call's phases and corral's events for the caller (session ready, lost ...)."""
        spec = BY_NAME.get(tool)
        if spec is None or not tool.startswith("computer_") or tool in RIG_TOOLS:
            return answer(text_block(f"Unknown tool: {tool}"), is_error=True)
        view, agent_cfg = await agent_and_view(self.home, agent)  # one read per call
        decision = decide(spec, view)
        if not decision.visible or agent_cfg is None:
            self.audit.record("computer_use_refused", agent, {"tool": tool})
            ended = ""
            if agent in self.sessions and (why := revocation(view)) is not None:
                await self.end(agent, why)
                ended = f" Your session ended: {why}."
            return answer(text_block(decision.message + ended), is_error=True)
        try:
            params = validate(spec.params, arguments)
            cfg = agent_cfg.capabilities.computer_use_config
            return await self._run(agent, tool, params, cfg, events)
        except ParamError as exc:
            return answer(text_block(f"Invalid arguments for {tool}: {exc}"), is_error=True)
        except (SessionRefused, KioskError, CorralError) as exc:
            ended = await self._end_if_broken(agent, events)
            return answer(text_block(f"{exc}{ended}"), is_error=True)

    async def _end_if_broken(self, agent: str, events: CallEvents = NO_EVENTS) -> str:
        """End the agent's session when its kiosk channel broke (no answer in time, closed,
        flooded): its container is removed now, not at the idle timeout. Returns the
        sentence to add to the answer, or ""."""
        session = self.sessions.get(agent)
        if session is None or not session.broken:
            return ""
        why = session.failure("its kiosk")
        await self.end(agent, why)
        await events.log("warning", "session_lost", {"session": session.id, "why": why})
        return f" Your session ended: {why}; start a new one with computer_session_start."

    async def _run(
        self, agent: str, tool: str, params: Any, cfg: ComputerUseConfig, events: CallEvents
    ) -> Answer:
        if tool == "computer_session_start":
            return await self.start(agent, params, cfg, events)
        if tool == "computer_session_stop":
            assert isinstance(params, SessionStopParams)
            return await self.stop_tool(agent, params.session_id)
        session = self._session_of(agent)
        await self._follow_settings(session, cfg)
        if tool == "computer_screenshot":
            shot = fit_width(await self.screenshot(session), params.max_width)
            return with_state(shot, session.summary(self.clock()))
        action = Action(
            tool=tool,
            name=tool,
            params=params,
            counted=tool in COUNTED,
            is_input=True,
            step=step_of(tool, params),
            details={"session": session.id, "tool": tool},
        )
        driver = KioskDriver(self.audit, cfg)
        return await self.pipeline.run(session, action, driver, events)

    def _status(self, session: KioskSession) -> str:
        return session.clock.status_line(self.clock())

    def _session_of(self, agent: str) -> KioskSession:
        session = self.sessions.get(agent)
        if session is None:
            why = self.ended.get(agent)
            raise SessionRefused(
                (f"Your session ended: {why}. " if why else "You have no session. ")
                + "Start one with computer_session_start."
            )
        return session

    # ------------------------------------------------------------------ start / stop
    async def start(
        self,
        agent: str,
        params: SessionStartParams,
        cfg: ComputerUseConfig,
        events: CallEvents = NO_EVENTS,
    ) -> Answer:
        if agent in self.sessions or agent in self._starting:
            existing = self.sessions.get(agent)
            ident = existing.id if existing else "starting"
            raise SessionRefused(
                f"You already have a session ({ident}); one session per agent. Stop it with "
                "computer_session_stop first."
            )
        self._starting.add(agent)
        try:
            return await self._start(agent, params, cfg, events)
        finally:
            self._starting.discard(agent)

    async def _start(
        self,
        agent: str,
        params: SessionStartParams,
        cfg: ComputerUseConfig,
        events: CallEvents,
    ) -> Answer:
        started = self.clock()
        pooled = await self.kiosk_pool.claim() if self.kiosk_pool is not None else None
        recipe = KioskStart(self.host, self.kiosk_pool)
        if pooled is not None:
            kiosk = await recipe.warm(agent, params, cfg, events, pooled)
        else:
            async with boot_slot(events, "kiosk"):
                kiosk = await recipe.cold(agent, params, cfg, events)
        return await self._ready(agent, params, cfg, events, kiosk, started)

    async def _ready(
        self,
        agent: str,
        params: SessionStartParams,
        cfg: ComputerUseConfig,
        events: CallEvents,
        kiosk: Started,
        started: float,
    ) -> Answer:
        """Record the started session and make computer_session_start's answer."""
        session_id, channel, stack = kiosk.session_id, kiosk.channel, kiosk.stack
        egress, ready = kiosk.egress, kiosk.ready
        session = KioskSession(
            **opened(session_id, agent, cfg, self.clock(), egress),
            width=params.width,
            height=params.height,
            channel=channel,
            stack=stack,
            chromium_sandbox=bool(ready.get("chromium_sandbox", False)),
        )
        self.sessions[agent] = session
        self.ended.pop(agent, None)
        self.record(session)
        self.audit.record(
            "computer_session_started",
            agent,
            {
                "session": session_id,
                "width": params.width,
                "height": params.height,
                "sites": list(session.pinned),
                "chromium_sandbox": session.chromium_sandbox,
                "ms": int((self.clock() - started) * 1000),
                "warm": ready.get("restarted") is not None,
            },
        )
        await events.log(
            "info", "session_ready", {"session": session_id, "sites": list(session.pinned)}
        )
        return self._started_answer(session, cfg, dict(egress.left_out))

    def _started_answer(
        self, session: KioskSession, cfg: ComputerUseConfig, left_out: dict[str, str]
    ) -> Answer:
        """computer_session_start's answer: the limits, the sites, the rules."""
        sites = navigable_sites(cfg.allowed_domains, session.pinned, left_out)
        sandbox_note = (
            "Chromium's own sandbox is on."
            if session.chromium_sandbox
            else "Chromium's own sandbox could not be used on this host; the container is the "
            "only boundary."
        )
        text = (
            f"Session {session.id} started ({session.width}x{session.height}). "
            f"Limits: {session.clock.max_actions} actions (click, type, key, scroll, navigate), "
            f"{session.clock.idle_timeout} s idle timeout, "
            f"{session.clock.max_lifetime} s lifetime. "
            f"computer_navigate may open: {sites}. {sandbox_note} "
            "It is your one kiosk session: your other conversations share it. "
            + describe_rules(cfg.confirm_words, cfg.confirm_urls, self.approvals.timeout_seconds)
            + " Nothing can be approved from chat or by a tool: a named operator decides."
        )
        return answer(
            text_block(text),
            session_id=session.id,
            max_actions=session.clock.max_actions,
            idle_timeout_seconds=session.clock.idle_timeout,
            max_lifetime_seconds=session.clock.max_lifetime,
            navigable_sites=list(session.pinned),
            left_out=left_out,
            high_risk_confirmable=False,
            approval_rules={
                "confirm_urls": list(cfg.confirm_urls),
                "confirm_words": list(cfg.confirm_words),
                "timeout_seconds": self.approvals.timeout_seconds,
            },
            chromium_sandbox=session.chromium_sandbox,
        )

    async def stop_tool(self, agent: str, session_id: str | None) -> Answer:
        session = self.sessions.get(agent)
        if session is None or (session_id is not None and session_id != session.id):
            raise SessionRefused(
                f"No session {session_id} of yours is running."
                if session_id
                else "You have no session to stop."
            )
        await self.end(agent, "stopped by the agent")
        return answer(
            text_block(f"Session {session.id} stopped; its container is removed."),
            session_id=session.id,
        )

    async def end(self, agent: str, why: str) -> None:
        session = self.sessions.pop(agent, None)
        if session is None:
            return
        self.ended[agent] = why
        self.approvals.cancel_session(session.id, f"the session ended: {why}")
        await self.unrecord(session, why)
        failed = await self.removed(session)
        self.audit.record(
            "computer_session_ended",
            agent,
            {"session": session.id, "why": why, "actions": session.clock.used, **failed},
        )

    async def close_all(self, why: str = "the gateway stopped") -> None:
        for agent in list(self.sessions):
            await self.end(agent, why)

    async def _follow_settings(self, session: KioskSession, cfg: ComputerUseConfig) -> None:
        """Apply the agent's current allowlist and deny list: they take effect from the next
        navigation and screenshot. A host removed from the allowlist is refused from now on
        and loses its route through the proxy (open tunnels closed); one added since the
        start is still not pinned (the URL check says to restart the session)."""
        removed = await session.follow(cfg)
        if removed:
            self.audit.record(
                "computer_allowlist_narrowed",
                session.agent,
                {"session": session.id, "removed": removed},
            )

    async def expire(self) -> list[str]:
        """End every session past its lifetime or idle timeout, or whose agent lost access,
        now; the agents whose session ended."""
        ended = []
        now = self.clock()
        self.approvals.expire_due()
        for agent, session in list(self.sessions.items()):
            if session.controller == "human" or session.waiting is not None:
                session.clock.last_action = now  # a person is working: not idle
            view, agent_cfg = await agent_and_view(self.home, agent)
            why = session.clock.expiry(now) or revocation(view)
            if why is None and agent_cfg is not None:
                # a host removed from the allowlist loses its route now
                await self._follow_settings(session, agent_cfg.capabilities.computer_use_config)
            else:
                await self.end(agent, why or "its agent.toml could not be used")
                ended.append(agent)
        return ended

    async def expire_forever(self, interval: float = 1.0) -> None:
        """`expire` every `interval` seconds, until cancelled."""
        while True:
            await anyio.sleep(interval)
            await self.expire()

    # ------------------------------------------------------------------ screenshot
    async def screenshot(self, session: KioskSession) -> Answer:
        """The AI's masked screenshot (orchestrator.surfaces.screenshots): never an error
        without an image, never an unmasked one; in the timeline, its image the recording's
        frame. A broken kiosk channel ends the session.

        The call uses the surface (`AiUse.acting`, as the pipeline's stages do): no
        recorder capture begins while it runs. Without it, the quiet time after the AI's
        last input could run out while its screenshot was being taken: the recorder asked
        for a second screenshot of the same screen, and the AI's next call waited behind
        it on the kiosk's channel (docs/benchmarks.md, "2026-12-05, night: the AI's
        screenshots")."""
        with session.use.acting():
            result = await masked_screenshot(session, self._status(session))
        outcome = "failed" if result.failed else "ok"
        self.oversight.record(session, "computer_screenshot", "screenshot", outcome, png=result.png)
        ended = await self._end_if_broken(session.agent) if result.failed else ""
        return result.noted(ended)


def revocation(view: AgentView) -> str | None:
    """Why an agent with this view may no longer hold a session (computer_use turned off,
    the tools denied, read-only, agent.toml unusable or deleted), or None."""
    decision = decide(BY_NAME["computer_session_start"], view)
    return None if decision.visible else f"its access was revoked ({decision.message})"


__all__ = ["EgressFactory", "SessionManager", "no_egress", "revocation"]
