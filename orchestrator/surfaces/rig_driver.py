"""What every rig shares beside the pipeline: its driver (the rig's own `run`) and the
rig_list answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.config import ComputerUseConfig
from orchestrator.errors import SessionRefused
from orchestrator.surfaces.answers import Answer, answer, text_block
from orchestrator.surfaces.base import Surface
from orchestrator.surfaces.browser import acts_on
from orchestrator.surfaces.browser.rig import BrowserRig
from orchestrator.surfaces.phones import MobileRig
from orchestrator.surfaces.pipeline import Action, Done
from sandboxes import rig_params as r
from sandboxes.approval_rules import Hold, click_hold, focus_hold, key_activates, navigate_hold
from sandboxes.urls import check_url


class RigDriver:
    """Every rig's driver for the pipeline: its own `run` (what a verb means there), the
    agent's approval rules (`confirm_words`, `confirm_urls`, the kiosk's) judged on what
    the verb acts on as the rig reads it; no timeline (the console's is the kiosk's)."""

    refused_event = "rig_action_refused"
    done_event = "rig_action"
    stop_with = "Close it with rig_close"
    keeps_timeline = False

    def __init__(self, cfg: ComputerUseConfig | None = None) -> None:
        self.cfg = cfg

    async def rules(self, rig: Any, action: Action) -> None:
        """The URL policy, before any approval, as the kiosk's driver applies it: a
        browser navigation only to a pinned host of the allowlist, over https."""
        verb = action.params
        if isinstance(rig, BrowserRig) and isinstance(verb, r.BrowserNavigate):
            verdict = check_url(verb.url, rig.allowed_domains, rig.pinned)
            if not verdict.allowed:
                raise SessionRefused(verdict.message)

    async def hold(self, rig: Any, action: Action) -> Hold | None:
        cfg = self.cfg
        if cfg is None or not (cfg.confirm_words or cfg.confirm_urls):
            return None
        if isinstance(rig, BrowserRig):
            return await browser_hold(rig, action.params, cfg)
        return None

    async def act(self, rig: Any, action: Action, status: str) -> Done:
        return Done(await rig.run(action.params, status))


RIG_DRIVER = RigDriver()


async def read_target(rig: BrowserRig, page: Any, verb: Any) -> dict[str, Any]:
    if verb.ref is None:
        return await acts_on.element(rig.locate(page, verb), verb.role, verb.name)
    known = acts_on.from_snapshot(rig.last_snapshot, verb.ref)
    if known is None:
        return acts_on.unread(f"ref {verb.ref} is not in the last extract a11y")
    return await acts_on.element(rig.locate(page, verb), *known)


DOINGS = {"click": "Click", "fill": "Fill", "select": "Select an option in"}


async def browser_hold(rig: BrowserRig, verb: Any, cfg: ComputerUseConfig) -> Hold | None:
    """browser_use: a navigation by `confirm_urls`; a click, fill or select by the element
    (its ref or role + name) as Playwright reads it; a press of Return, Enter or space by
    the focused element (a text field's form's submit control)."""
    if isinstance(verb, r.BrowserNavigate):
        return navigate_hold(verb.url, cfg.confirm_urls)
    if isinstance(verb, r.BrowserClick | r.BrowserFill | r.BrowserSelect):
        page = await rig.page()
        target = await read_target(rig, page, verb)
        hold = click_hold(
            target["name"],
            target["role"],
            cfg.confirm_words,
            href=target["href"],
            confirm_urls=cfg.confirm_urls,
            unknown_reason=target["error"],
            text=target["text"],
            doing=DOINGS[verb.verb],
        )
        return None if hold is None else hold.on(target | {"page": page.url})
    if isinstance(verb, r.BrowserPress) and key_activates(verb.verdict.key):
        page = await rig.page()
        focused = await acts_on.focused(page)
        if focused.get("role") == "document":
            focused["name"], focused["text"] = "", ""
        hold = focus_hold(
            focused, cfg.confirm_words, key=verb.verdict.key, confirm_urls=cfg.confirm_urls
        )
        return None if hold is None else hold.on(focused | {"page": page.url})
    return None


def rig_list_answer(rigs: Mapping[str, Surface], now: float) -> Answer:
    """rig_list: the agent's rigs by surface, with their budget and time left."""
    rows: list[dict[str, Any]] = []
    for surface, rig in sorted(rigs.items()):
        idle, life = rig.clock.time_left(now)
        rows.append(
            {
                "rig_id": rig.id,
                "surface": surface,
                "state": rig.state,
                "screen": f"{rig.width}x{rig.height}",
                "device": rig.device if isinstance(rig, MobileRig) else None,
                "controller": rig.controller,
                "actions_used": rig.clock.used,
                "max_actions": rig.clock.max_actions,
                "idle_seconds_left": idle,
                "lifetime_seconds_left": life,
            }
        )
    if not rows:
        return answer(text_block("You have no rig."), rigs=[])
    lines = [
        f"{row['rig_id']}: {row['surface']}, {row['state']}, {row['screen']}, "
        f"controlled by {'the AI' if row['controller'] == 'ai' else 'a person'}, "
        f"{row['actions_used']}/{row['max_actions']} actions, "
        f"{row['lifetime_seconds_left']} s of lifetime left"
        for row in rows
    ]
    return answer(text_block("\n".join(lines)), rigs=rows)
