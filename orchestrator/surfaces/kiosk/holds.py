"""What a kiosk action acts on, read for the approval rules (sandboxes.approval_rules):
a click's element at x,y (the kiosk agent's `target` op), an activating key's or typed
newline's focused element (`focused`). The same reader judges an action before its
approval and again right after it (orchestrator.surfaces.pipeline): what it read is bound
into the approval."""

from __future__ import annotations

from typing import Any

from orchestrator.config import ComputerUseConfig
from orchestrator.errors import KioskError
from orchestrator.surfaces.kiosk.session import KioskSession
from sandboxes.approval_rules import (
    Hold,
    click_hold,
    focus_hold,
    key_activates,
    navigate_hold,
    text_activates,
)
from sandboxes.params import ClickParams, KeyParams, NavigateParams, TypeParams

TARGET_DEADLINE = 3.0
DOCUMENT_ROLES = frozenset({"RootWebArea", "WebArea", "document"})
CHANNEL_FIELDS = ("id", "ok", "ms")  # the agent channel's, not the element's


def as_read(answer: dict[str, Any]) -> dict[str, Any]:
    """An element as the kiosk read it, without the channel's request id and timings (a
    new read of the same element is the same dict)."""
    return {k: v for k, v in answer.items() if k not in CHANNEL_FIELDS}


async def kiosk_hold(session: KioskSession, params: Any, cfg: ComputerUseConfig) -> Hold | None:
    """The rule that makes this call wait, if any, with the target it judged."""
    if isinstance(params, NavigateParams):
        return navigate_hold(params.url, cfg.confirm_urls)
    if isinstance(params, ClickParams) and (cfg.confirm_words or cfg.confirm_urls):
        try:
            target = as_read(
                await session.channel.request("target", TARGET_DEADLINE, x=params.x, y=params.y)
            )
        except KioskError as exc:
            target = {"name": None, "error": f"the kiosk could not tell ({exc})"}
        name = target.get("name")
        if target.get("role") in DOCUMENT_ROLES:
            name = ""  # the page itself: its name is the title, not a control's
        hold = click_hold(
            name,
            target.get("role"),
            cfg.confirm_words,
            href=target.get("href"),
            confirm_urls=cfg.confirm_urls,
            unknown_reason=target.get("error"),
            text=target.get("text"),
        )
        return None if hold is None else hold.on(target)
    key = activating_key(params)
    if key is not None and (cfg.confirm_words or cfg.confirm_urls):
        focused = await read_focused(session)
        hold = focus_hold(focused, cfg.confirm_words, key=key, confirm_urls=cfg.confirm_urls)
        return None if hold is None else hold.on(focused)
    return None


def activating_key(params: Any) -> str | None:
    """The key by which this input can activate the focused element (Return for a typed
    newline), or None when it cannot."""
    if isinstance(params, KeyParams) and key_activates(params.key):
        return params.key
    if isinstance(params, TypeParams) and text_activates(params.text):
        return "Return (a typed newline)"
    return None


async def read_focused(session: KioskSession) -> dict[str, Any]:
    """The kiosk's focused element as the kiosk reads it (an unknown on any failure)."""
    try:
        focused = as_read(await session.channel.request("focused", TARGET_DEADLINE))
    except KioskError as exc:
        return {"name": None, "error": f"the kiosk could not tell ({exc})"}
    if focused.get("role") in DOCUMENT_ROLES:
        focused["name"], focused["text"] = "", ""  # no element has the focus
    return focused
