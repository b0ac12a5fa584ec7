"""What every rig shares beside the pipeline: its driver (the rig's own `run`) and the
rig_list answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.config import ComputerUseConfig
from orchestrator.errors import DeviceError, SessionRefused
from orchestrator.surfaces.acts_on import input_hold
from orchestrator.surfaces.answers import Answer, answer, text_block
from orchestrator.surfaces.base import Surface
from orchestrator.surfaces.browser import acts_on, reading
from orchestrator.surfaces.browser.rig import BrowserRig
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.phones import MobileRig
from orchestrator.surfaces.pipeline import Action, Done
from sandboxes import mobile_params as m
from sandboxes import rig_params as r
from sandboxes.approval_rules import (
    Hold,
    click_hold,
    focus_hold,
    key_activates,
    navigate_hold,
    text_activates,
)
from sandboxes.mobile_ui import UiTree, UiTreeError, focused_target, tap_target
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
        if isinstance(rig, DesktopRig):
            return await input_hold(rig.channel, action.params, cfg, focus_op="focus_target")
        if isinstance(rig, MobileRig):
            return await phone_hold(rig, action.params, cfg)
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
    return await reading.read_ref(rig, page, verb.ref, *known)


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


PHONE_KEYS = frozenset({"ENTER", "NUMPAD_ENTER", "DPAD_CENTER", "SPACE"})


async def phone_tree(rig: MobileRig) -> UiTree | str:
    """The phone's UI tree now, or why it could not be read."""
    try:
        return await rig.dump()
    except (UiTreeError, DeviceError) as exc:
        return f"the device's UI tree could not be read ({str(exc)[:200]})"


async def phone_hold(rig: MobileRig, verb: Any, cfg: ComputerUseConfig) -> Hold | None:
    """mobile_use / ios_use: a tap (or a swipe's press and release) by the element at its
    point in the UI tree read now; an Android ENTER, DPAD_CENTER or SPACE by the focused
    node (a text field by the button after it); an iOS text with a newline (Return) by the
    focused element, which WDA's source does not tell: held."""
    words, urls = cfg.confirm_words, cfg.confirm_urls
    if isinstance(verb, m.AndroidTap | m.IosTap):
        points = [rig.point(verb)[:2]]
    elif isinstance(verb, m.AndroidSwipe | m.IosSwipe):
        points = [(verb.x, verb.y), (verb.to_x, verb.to_y)]
    elif isinstance(verb, m.AndroidKey) and verb.key in PHONE_KEYS:
        tree = await phone_tree(rig)
        read = focused_target(tree) if isinstance(tree, UiTree) else {"error": tree}
        return focus_hold(read, words, key=f"KEYCODE_{verb.key}", confirm_urls=urls)
    elif isinstance(verb, m.IosText) and text_activates(verb.text):
        why = "WebDriverAgent does not say which element has the keyboard focus"
        return focus_hold({"error": why}, words, key="Return (a typed newline)")
    else:
        return None
    tree = await phone_tree(rig)
    for x, y in points:
        target = tap_target(tree, x, y) if isinstance(tree, UiTree) else {"error": tree}
        hold = click_hold(
            target.get("name"),
            target.get("role"),
            words,
            unknown_reason=target.get("error"),
            text=target.get("text"),
            doing="Tap",
        )
        if hold is not None:
            return hold
    return None


def rig_list_answer(rigs: Mapping[str, Surface], now: float, others: int = 0) -> Answer:
    """rig_list: the conversation's rigs by surface, with their budget and time left, and
    how many rigs the agent's other conversations hold."""
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
    elsewhere = f"\nYour other conversations have {others} rig(s) of their own." if others else ""
    if not rows:
        return answer(text_block(f"You have no rig.{elsewhere}"), rigs=[], others=others)
    lines = [
        f"{row['rig_id']}: {row['surface']}, {row['state']}, {row['screen']}, "
        f"controlled by {'the AI' if row['controller'] == 'ai' else 'a person'}, "
        f"{row['actions_used']}/{row['max_actions']} actions, "
        f"{row['lifetime_seconds_left']} s of lifetime left"
        for row in rows
    ]
    return answer(text_block("\n".join(lines) + elsewhere), rigs=rows, others=others)
