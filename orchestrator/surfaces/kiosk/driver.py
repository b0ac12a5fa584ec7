"""The kiosk's driver for the action pipeline (orchestrator.surfaces.pipeline): what
computer_click, _type, _key, _scroll and _navigate mean on a kiosk, its rule (the URL
policy) and its approval rule (confirm_urls, confirm_words)."""

from __future__ import annotations

from orchestrator.audit import AuditLog
from orchestrator.config import ComputerUseConfig
from orchestrator.errors import SessionRefused
from orchestrator.surfaces.answers import answer, text_block
from orchestrator.surfaces.base import proxy_alive
from orchestrator.surfaces.inputs import channel_input
from orchestrator.surfaces.kiosk.holds import kiosk_hold
from orchestrator.surfaces.kiosk.session import KioskSession
from orchestrator.surfaces.pipeline import Action, Done
from sandboxes.approval_rules import Hold
from sandboxes.params import KeyParams, NavigateParams, ScrollParams, TypeParams
from sandboxes.urls import check_url

NAVIGATE_DEADLINE = 30.0


class KioskDriver:
    refused_event = "computer_action_refused"
    done_event = "computer_action"
    stop_with = ""
    keeps_timeline = True

    def __init__(self, audit: AuditLog, cfg: ComputerUseConfig) -> None:
        self.audit = audit
        self.cfg = cfg

    async def rules(self, session: KioskSession, action: Action) -> None:
        if isinstance(action.params, NavigateParams):
            verdict = check_url(action.params.url, session.allowed_domains, session.pinned)
            if not verdict.allowed:
                details = {**action.details, "why": "url"}
                self.audit.record(self.refused_event, session.agent, details)
                raise SessionRefused(verdict.message)

    async def hold(self, session: KioskSession, action: Action) -> Hold | None:
        return await kiosk_hold(session, action.params, self.cfg)

    async def act(self, session: KioskSession, action: Action, status: str) -> Done:
        params = action.params
        if isinstance(params, NavigateParams):
            return await self._navigate(session, params, status)
        verb = action.tool.removeprefix("computer_")
        done = await channel_input(session.channel, verb, params, holds_seat=session.ai_holds)
        if done is None:
            raise SessionRefused(f"{action.tool} is not a kiosk action")
        out = Done(answer(text_block(f"{done} {status}")))
        if isinstance(params, TypeParams):
            out.details["chars"] = len(params.text)  # the text itself is never audited
            out.step = f"typed {len(params.text)} characters"
        elif isinstance(params, KeyParams):
            out.details["key_class"] = params.verdict.key_class  # keys can spell secrets
            out.step = f"pressed a {params.verdict.key_class}"
        elif isinstance(params, ScrollParams):
            out.step = f"scrolled {params.direction} {params.amount} at {params.x},{params.y}"
        return out

    async def _navigate(self, session: KioskSession, params: NavigateParams, status: str) -> Done:
        verdict = check_url(params.url, session.allowed_domains, session.pinned)
        result = await session.channel.request("navigate", NAVIGATE_DEADLINE, url=params.url)
        details = {"host": verdict.host}
        if result.get("error_text"):
            await proxy_alive(session, f"Navigation to {verdict.host} failed")
            failed = f"Navigation to {verdict.host} failed: {result['error_text']}. {status}"
            outcome = f"failed: {result['error_text']}"
            return Done(answer(text_block(failed), is_error=True), outcome, details=details)
        opened = f"Opened {result.get('url', params.url)}. {status}"
        return Done(answer(text_block(opened)), details=details)
