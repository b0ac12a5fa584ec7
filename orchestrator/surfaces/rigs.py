"""Rigs (SPEC S4.1-S4.2): the gateway's handler for browser_use, computer_use,
mobile_use, ios_use, rig_list and rig_close.

One rig per agent, conversation and surface: repeated calls of a conversation share it,
conversations and agents never do, and it ends with its conversation. Like kiosk
sessions, each rig has an action budget, an idle timeout and a lifetime (the agent's
[capabilities.computer_use_config]), its own egress (the same proxy and rules), labelled
containers reaped with the rest, and it is removed at once by rig_close. The gateway
checks the gate itself: the MCP front only forwards. The phone rigs (mobile_use,
ios_use) have no container: they lease a configured device (`orchestrator.surfaces.devices`),
released when the rig ends.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from orchestrator.agents.view import agent_and_view
from orchestrator.config import ComputerUseConfig
from orchestrator.errors import CorralError, NotAvailable, ParamError, RigError, SessionRefused
from orchestrator.surfaces.android.rig import AndroidRig
from orchestrator.surfaces.answers import Answer, answer, text_block, told_first
from orchestrator.surfaces.base import Surface
from orchestrator.surfaces.browser.rig import BrowserRig
from orchestrator.surfaces.conversations import Conversations
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.devices import MobileDevices
from orchestrator.surfaces.ios.rig import IosRig
from orchestrator.surfaces.manager import SurfaceManager
from orchestrator.surfaces.phones import MobileRig
from orchestrator.surfaces.pipeline import Action
from orchestrator.surfaces.rig_driver import RigDriver, rig_list_answer
from orchestrator.surfaces.rig_start import RIG_PREFIX, RigStarts
from orchestrator.surfaces.start import navigable_sites
from sandboxes.catalogue import BY_NAME, CODRIVE_TOOLS, RIG_TOOLS
from sandboxes.events import NO_EVENTS, CallEvents
from sandboxes.params import validate
from sandboxes.rig_params import RigCloseParams, VerbUnion
from sandboxes.visibility import decide

logger = logging.getLogger("corral.rigs")

Clock = Callable[[], float]
RigTool = Callable[[str, Any, ComputerUseConfig, CallEvents, str], Awaitable[Answer]]
RigKey = tuple[str, str, str]  # (agent, surface, conversation): "" for a caller naming none
Rig = BrowserRig | DesktopRig | AndroidRig | IosRig
SURFACES = {
    "browser_use": "browser",
    "computer_use": "desktop",
    "mobile_use": "android",
    "ios_use": "ios",
}
FREE_VERBS = frozenset({"screenshot"})  # allowed while a person has it (not the clipboard:
# what a person copies, an OTP, is theirs)
TOOL_OF = {surface: tool for tool, surface in SURFACES.items()}
# The tools that keep a surface's rig alive: the desktop is also codrive's shared desktop.
USERS_OF = {
    "browser": ("browser_use",),
    "desktop": ("computer_use", "codrive_run"),
    "android": ("mobile_use",),
    "ios": ("ios_use",),
}


class RigManager(SurfaceManager):
    """Every rig, one per agent, conversation and surface kind, listed in the gateway's
    seats. A rig ends with its conversation (`orchestrator.surfaces.conversations`)."""

    def setup(self) -> None:
        self.rigs: dict[RigKey, Rig] = {}
        self.ended: dict[RigKey, str] = {}  # why the last rig of each ended
        self._ending: dict[RigKey, anyio.Event] = {}  # ends under way: set once removed
        self._locks: dict[RigKey, anyio.Lock] = {}
        self.conversations = Conversations(clock=self.clock)
        self.starts = RigStarts(self.host, lambda: self.clock())  # cold, or from the pools
        self.mobile = MobileDevices(self.config, self.home.root / "adb", self.home.config_file)
        # Tools a room above registers (codrive): gated here, then handed the params.
        self.tools: dict[str, RigTool] = {}

    def register(self, tools: Iterable[str], handler: RigTool) -> None:
        """Serve `tools` (codrive's, from the gateway) behind this manager's gate: the
        handler gets the agent, the validated params, its computer_use_config, events and
        the conversation."""
        for tool in tools:
            self.tools[tool] = handler

    def surfaces(self) -> list[Rig]:
        return list(self.rigs.values())

    async def end_surface(self, surface: Surface, why: str) -> None:
        for key, rig in list(self.rigs.items()):
            if rig is surface:
                await self.end(key, why)

    @asynccontextmanager
    async def holding(
        self,
        agent: str,
        surface: str,
        cfg: ComputerUseConfig,
        events: CallEvents,
        conversation: str = "",
    ) -> AsyncIterator[Rig]:
        """The conversation's rig of `surface` (started if needed), held: one start per
        agent, conversation and surface, and the calls on one rig in order."""
        key = (agent, surface, conversation)
        async with self._locks.setdefault(key, anyio.Lock()):
            rig = self.rigs.get(key)
            if rig is None:
                await self._removed(key)  # the one before it gone first: one rig at a time
                rig = await self._start(key, cfg, events)
            yield rig

    # ------------------------------------------------------------------ handler
    async def handle(
        self,
        agent: str,
        tool: str,
        arguments: dict[str, Any],
        events: CallEvents = NO_EVENTS,
        conversation: str = "",
    ) -> Answer:
        spec = BY_NAME.get(tool)
        if spec is None or tool not in RIG_TOOLS | CODRIVE_TOOLS:
            return answer(text_block(f"Unknown tool: {tool}"), is_error=True)
        view, agent_cfg = await agent_and_view(self.home, agent)
        decision = decide(spec, view)
        if not decision.visible or agent_cfg is None:
            self.audit.record("rig_refused", agent, {"tool": tool})
            return answer(text_block(decision.message), is_error=True)
        self.conversations.touch(agent, conversation)
        try:
            params = validate(spec.params, arguments)
            cfg = agent_cfg.capabilities.computer_use_config
            if tool == "rig_list":
                return self.rig_list(agent, conversation)
            if tool == "rig_close":
                assert isinstance(params, RigCloseParams)
                return await self.rig_close(agent, conversation, params.rig_id)
            if tool in CODRIVE_TOOLS:
                handler = self.tools.get(tool)
                if handler is None and tool == "codrive_status":
                    return answer(
                        text_block("You have no codrive run (runs are kept for a while).")
                    )
                if handler is None:
                    raise NotAvailable(
                        "codrive needs the gateway's approval queue (corral gateway)"
                    )
                return await handler(agent, params, cfg, events, conversation)
            assert isinstance(params, VerbUnion)
            if tool == "mobile_use" and params.verb.verb == "devices":
                await self.mobile.refresh()
                return await self.mobile.devices_answer(agent)
            key = (agent, SURFACES[tool], conversation)
            return await self._drive(key, params, cfg, events)
        except ParamError as exc:
            return answer(text_block(f"Invalid arguments for {tool}: {exc}"), is_error=True)
        except CorralError as exc:
            ended = await self._end_if_broken(agent, conversation, SURFACES.get(tool))
            return answer(text_block(f"{exc}{ended}"), is_error=True)

    async def _drive(
        self, key: RigKey, params: VerbUnion[Any], cfg: ComputerUseConfig, events: CallEvents
    ) -> Answer:
        agent, surface, conversation = key
        verb = params.verb
        driver = RigDriver(cfg)
        running = self.rigs.get(key)
        if running is not None and running.waiting is not None:
            # An approval is pending: input is refused now and a screenshot taken now,
            # neither queued behind the held call (the pipeline's pending stage).
            return await self.pipeline.run(
                running, action_of(running, surface, verb), driver, events
            )
        async with self.holding(agent, surface, cfg, events, conversation) as rig:
            await self.follow(rig, cfg)
            said = await self.pipeline.run(rig, action_of(rig, surface, verb), driver, events)
            notice, rig.notice = rig.notice, None
            return said if notice is None else told_first(said, notice)

    async def follow(self, rig: Rig, cfg: ComputerUseConfig) -> None:
        """The agent's current allowlist and deny list apply from the next call; a host
        removed from the allowlist also loses its route through the proxy now (as for
        kiosk sessions). A host added since the start is not pinned: close the rig."""
        removed = await rig.follow(cfg)
        if removed:
            self.audit.record(
                "rig_allowlist_narrowed", rig.agent, {"rig": rig.id, "removed": removed}
            )

    # ------------------------------------------------------------------ start
    async def _start(self, key: RigKey, cfg: ComputerUseConfig, events: CallEvents) -> Rig:
        agent, surface, _ = key
        if len(self.rigs) >= self.config.container.rigs.max_rigs_per_host:
            raise SessionRefused(
                f"this host already runs {len(self.rigs)} rigs ([container.rigs] "
                "max_rigs_per_host); try again when one is closed"
            )
        rig_id = RIG_PREFIX + uuid.uuid4().hex[:9]
        started = self.clock()
        if surface in ("android", "ios"):
            await self.mobile.refresh()
            start = self.mobile.start_android if surface == "android" else self.mobile.start_ios
            return self._started(key, await start(rig_id, agent, cfg, started), started)
        rig, warm = await self.starts.start(surface, rig_id, agent, cfg, events)
        self._keep(key, rig)
        sites = navigable_sites(cfg.allowed_domains, rig.pinned, dict(rig.egress.left_out))  # type: ignore[union-attr]
        sandbox = rig.chromium_sandbox if isinstance(rig, BrowserRig) else None
        self.audit.record(
            "rig_started",
            agent,
            {
                "rig": rig.id,
                "surface": surface,
                "sites": list(rig.pinned),
                "chromium_sandbox": sandbox,
                "warm": warm,
                "ms": int((self.clock() - started) * 1000),
            },
        )
        await events.log("info", "rig_ready", {"rig": rig.id, "surface": surface})
        await events.progress(surface, f"rig {rig.id} is ready; it may open: {sites}")
        return rig

    def _keep(self, key: RigKey, rig: Rig) -> None:
        """A started rig is the conversation's; its first answer says why the one before
        it ended, when that was not said already."""
        rig.conversation = key[2]
        taken = {r.seat for k, r in self.rigs.items() if k[:2] == key[:2]}
        rig.seat_suffix = f"-{(key[2] or rig.id)[1:7]}" if rig.seat in taken else ""
        self.rigs[key] = rig
        self.record(rig)
        ended = self.ended.pop(key, None)
        if ended is not None:
            rig.notice = f"{ended}; this call started a new one, {rig.id}."

    def _started(self, key: RigKey, rig: MobileRig, started: float) -> Rig:
        assert isinstance(rig, AndroidRig | IosRig)
        self._keep(key, rig)
        self.audit.record(
            "rig_started",
            key[0],
            {
                "rig": rig.id,
                "surface": key[1],
                "device": rig.device,
                "ms": int((self.clock() - started) * 1000),
            },
        )
        return rig

    # ------------------------------------------------------------------ list / close
    def rig_list(self, agent: str, conversation: str) -> Answer:
        """This conversation's rigs, and how many the agent's other conversations hold."""
        theirs = [key for key in self.rigs if key[0] == agent]
        mine = {key[1]: self.rigs[key] for key in theirs if key[2] == conversation}
        return rig_list_answer(mine, self.clock(), others=len(theirs) - len(mine))

    async def rig_close(self, agent: str, conversation: str, rig_id: str | None) -> Answer:
        """One of this conversation's rigs, or all of them (another conversation's rigs
        are its own)."""
        mine = [key for key in self.rigs if key[0] == agent and key[2] == conversation]
        if rig_id is not None:
            mine = [key for key in mine if self.rigs[key].id == rig_id]
            if not mine:
                raise SessionRefused(f"rig_id: no rig {rig_id} of yours is running (rig_list)")
        if not mine:
            return answer(text_block("You have no rig to close."), closed=[])
        closed = [self.rigs[key].id for key in mine]
        for key in mine:
            await self.end(key, "closed by the agent")
            self.ended.pop(key, None)  # the agent knows
        return answer(
            text_block(
                f"Closed {', '.join(closed)}: containers, network and profile removed, "
                "device leases released."
            ),
            closed=closed,
        )

    async def end(self, key: RigKey, why: str) -> None:
        rig = self.rigs.pop(key, None)
        if rig is None:
            return
        self.ended[key] = f"Your {key[1]} rig {rig.id} ended: {why}"
        done = self._ending[key] = anyio.Event()
        try:
            if self.oversight is not None:
                self.oversight.approvals.cancel_session(rig.id, f"the rig ended: {why}")
            await self.unrecord(rig, why)
            failed = await self.removed(rig)
        finally:
            if isinstance(rig, MobileRig):
                self.mobile.release(rig)
            done.set()
            del self._ending[key]  # one end of a key at a time: `holding` waits for it
        self.audit.record(
            "rig_ended", key[0], {"rig": rig.id, "why": why, "actions": rig.clock.used, **failed}
        )

    async def _end_if_broken(self, agent: str, conversation: str, surface: str | None) -> str:
        """After a failed call: end the conversation's rig whose channel broke, and say so
        in this answer. A rig of the call's `surface` that the expiry loop ended while the
        call was failing (it ends broken rigs too) is said here as well, not left for the
        next call to tell (series run g-3)."""
        for key, rig in list(self.rigs.items()):
            if key[0] == agent and key[2] == conversation and rig.broken is not None:
                why = rig.failure("its channel")
                await self.end(key, why)
                self.ended.pop(key, None)  # said in this answer
                tool = TOOL_OF[key[1]]
                return f" Your rig {rig.id} ended: {why}; the next {tool} call starts a new one."
        if surface is None:
            return ""
        # `_keep` pops an end once a new rig runs: one still held here is unsaid, once its
        # removal (by the expiry loop) is done: never while its containers are there.
        key = (agent, surface, conversation)
        await self._removed(key)
        said = self.ended.pop(key, None)
        if said is None:
            return ""
        return f" {said}; the next {TOOL_OF[surface]} call starts a new one."

    async def _removed(self, key: RigKey) -> None:
        """Return once an end of `key`'s rig under way (in another task) is done."""
        done = self._ending.get(key)
        if done is not None:
            await done.wait()

    async def expire(self) -> list[RigKey]:
        """End every rig past its lifetime or idle timeout, whose conversation ended, or
        whose agent lost the tool."""
        ended = []
        now = self.clock()
        for key, rig in list(self.rigs.items()):
            view, agent_cfg = await agent_and_view(self.home, key[0])
            why = rig.clock.expiry(now) or self.conversations.gone(key[0], key[2])
            if why is None and not any(
                decide(BY_NAME[tool], view).visible for tool in USERS_OF[key[1]]
            ):
                why = "its access was revoked"
            if why is None and (rig.broken is not None or await _proxy_gone(rig)):
                why = rig.failure("its channel")
            if why is not None:
                await self.end(key, why)
                ended.append(key)
            elif agent_cfg is not None:  # a host removed from the allowlist loses its route
                await self.follow(rig, agent_cfg.capabilities.computer_use_config)
        return ended

    async def expire_forever(self, interval: float = 1.0) -> None:
        while True:
            await anyio.sleep(interval)
            await self.expire()

    async def close_all(self, why: str = "the gateway stopped") -> None:
        with anyio.CancelScope(shield=True):
            for key in list(self.rigs):
                await self.end(key, why)
            await self.starts.close()
            await self.mobile.close()


__all__ = ["RigError", "RigManager"]


async def _proxy_gone(rig: Rig) -> bool:
    """Whether a desktop rig's egress proxy is gone (asked over its control channel). The
    apps on a desktop load their pages themselves, so no failed navigation of corral's
    would ask, as it does for kiosks and browser rigs; a dead proxy leaves the rig with no
    route out at all (it fails closed), and the rig ends saying so."""
    if not isinstance(rig, DesktopRig) or rig.egress is None:
        return False
    gone = await rig.egress.check()
    if gone:
        rig.egress_gone = gone
    return bool(gone)


def action_of(rig: Rig, surface: str, verb: Any) -> Action:
    """A rig verb as the pipeline sees it."""
    details: dict[str, Any] = {"rig": rig.id, "verb": verb.verb}
    if verb.verb in ("fill", "clipboard_set", "type", "text"):
        details["chars"] = len(verb.text)  # never the text
    return Action(
        tool=TOOL_OF[surface],
        name=f"{TOOL_OF[surface]} {verb.verb}",
        params=verb,
        counted=rig.counts(verb),
        is_input=verb.verb not in FREE_VERBS,
        step=verb.verb,
        details=details,
    )
