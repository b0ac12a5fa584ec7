"""Pointer and keyboard input over an agent channel, written once: the kiosk's computer_*
tools and the desktop rig's computer_use verbs both say click, type, key and scroll to
the same agent protocol (`rig_images/kiosk/kiosk_agent`, `rig_images/desktop`)."""

from __future__ import annotations

from typing import Any

from orchestrator.channel import KioskChannel
from sandboxes.keys import check_key

ACTION_DEADLINE = 10.0


async def channel_input(
    channel: KioskChannel, verb: str, params: Any, *, type_deadline: float = ACTION_DEADLINE
) -> str | None:
    """Send one input (`params` validated already); the sentence that says what was done,
    or None when `verb` is not pointer or keyboard input. A key is sent as its checked
    verdict (`sandboxes.keys.check_key`), never as the model wrote it."""
    req = channel.request
    if verb == "click":
        fields = {"x": params.x, "y": params.y, "button": params.button, "double": params.double}
        await req("click", ACTION_DEADLINE, **fields)
        return f"Clicked {params.button} at {params.x},{params.y}."
    if verb == "type":
        await req("type", type_deadline, text=params.text)
        return f"Typed {len(params.text)} characters."
    if verb == "key":
        pressed = check_key(params.key)
        await req("key", ACTION_DEADLINE, key=pressed.key)
        return f"Pressed {pressed.key}."
    if verb == "scroll":
        where = {"x": params.x, "y": params.y}
        await req(
            "scroll", ACTION_DEADLINE, direction=params.direction, amount=params.amount, **where
        )
        return f"Scrolled {params.direction} {params.amount} at {params.x},{params.y}."
    return None
