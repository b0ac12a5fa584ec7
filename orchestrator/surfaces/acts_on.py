"""What an input acts on, read for the approval rules (issue 22 item 2), once for every
surface behind an agent channel: the kiosk (its `target` and `focused` ops read the page
over CDP, `rig_images/kiosk/kiosk_agent/target.py`) and the desktop rig (its `target`
and `focus_target` ops read AT-SPI, `rig_images/desktop/desktop_target.py`; the desktop
agent's `focused` is codrive's). Both answer `{name, role, text, href, error}`, and the
focus adds `submit` (a text field's form's submit control, or the window's default
button); the rules are `sandboxes.approval_rules`' `click_hold` and `focus_hold`, judged
here and nowhere else for these surfaces.

A click (or the press and the release of a drag) is judged by the element at its point;
a key that activates (Return, KP_Enter, space) and a typed newline by the focused
element. What cannot be read (the op failed, timed out, or is unknown to an old image)
comes back with an `error`, and the rules hold it. A hold carries the element it judged
(`Hold.on`): the approval binds it, and the pipeline reads it again after the approval
(orchestrator.surfaces.pipeline).
"""

from __future__ import annotations

from typing import Any

from orchestrator.backends.channel import KioskChannel
from orchestrator.config import ComputerUseConfig
from orchestrator.errors import KioskError
from sandboxes import rig_params as r
from sandboxes.approval_rules import Hold, click_hold, focus_hold, key_activates, text_activates
from sandboxes.params import ClickParams, KeyParams, TypeParams

TARGET_DEADLINE = 3.0
CHANNEL_FIELDS = ("id", "ok", "ms")  # the agent channel's, not the element's
# The kiosk's roles of no element in particular (the page itself): their name is the
# page's title, not a control's.
DOCUMENT_ROLES = frozenset({"RootWebArea", "WebArea", "document"})


def as_read(answer: dict[str, Any]) -> dict[str, Any]:
    """An element as the agent read it, without the channel's request id and timings (a
    new read of the same element is the same dict)."""
    return {k: v for k, v in answer.items() if k not in CHANNEL_FIELDS}


def activating_key(params: Any) -> str | None:
    """The key by which this input can activate the focused element (Return for a typed
    newline), or None when it cannot."""
    if isinstance(params, KeyParams | r.DesktopKey) and key_activates(params.key):
        return params.key
    if isinstance(params, TypeParams | r.DesktopType) and text_activates(params.text):
        return "Return (a typed newline)"
    return None


def points_of(params: Any) -> tuple[tuple[int, int], ...]:
    """The screen points at which this input presses or releases a button."""
    if isinstance(params, ClickParams | r.DesktopClick):
        return ((params.x, params.y),)
    if isinstance(params, r.DesktopDrag):  # pressed at the start, released at the end
        return ((params.x, params.y), (params.to_x, params.to_y))
    return ()


async def read_target(channel: KioskChannel, x: int, y: int) -> dict[str, Any]:
    """The element at screen point (x, y) as the agent reads it (an unknown on failure)."""
    try:
        target = as_read(await channel.request("target", TARGET_DEADLINE, x=x, y=y))
    except KioskError as exc:
        return {"name": None, "error": f"the {channel.name} could not tell ({exc})"}
    if target.get("role") in DOCUMENT_ROLES:
        target["name"], target["text"] = "", ""
    return target


async def read_focused(channel: KioskChannel, op: str = "focused") -> dict[str, Any]:
    """The focused element as the agent reads it with `op` (an unknown on any failure)."""
    try:
        focused = as_read(await channel.request(op, TARGET_DEADLINE))
    except KioskError as exc:
        return {"name": None, "error": f"the {channel.name} could not tell ({exc})"}
    if focused.get("role") in DOCUMENT_ROLES:
        focused["name"], focused["text"] = "", ""  # no element has the focus
    return focused


async def input_hold(
    channel: KioskChannel, params: Any, cfg: ComputerUseConfig, *, focus_op: str = "focused"
) -> Hold | None:
    """The hold a pointer or keyboard input on a channel surface needs, if any; the
    agent's op that reads the focus is `focus_op` (the desktop's is `focus_target`)."""
    if not (cfg.confirm_words or cfg.confirm_urls):
        return None
    for x, y in points_of(params):
        target = await read_target(channel, x, y)
        hold = click_hold(
            target.get("name"),
            target.get("role"),
            cfg.confirm_words,
            href=target.get("href"),
            confirm_urls=cfg.confirm_urls,
            unknown_reason=target.get("error"),
            text=target.get("text"),
        )
        if hold is not None:
            return hold.on(target)
    key = activating_key(params)
    if key is None:
        return None
    focused = await read_focused(channel, focus_op)
    hold = focus_hold(focused, cfg.confirm_words, key=key, confirm_urls=cfg.confirm_urls)
    return None if hold is None else hold.on(focused)
