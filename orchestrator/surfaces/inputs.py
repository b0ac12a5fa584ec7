"""Pointer and keyboard input over an agent channel, written once: the kiosk's computer_*
tools and the desktop rig's computer_use verbs both say click, type, key and scroll to
the same agent protocol (`rig_images/kiosk/kiosk_agent`, `rig_images/desktop`).

Text is typed in chunks of `TYPE_CHUNK` characters, one `type` request each, and the
seat (`holds_seat`, asked under the surface's lock) is checked before every chunk: a
person who takes the seat mid-type stops it within one chunk, and the rest is not typed
(`InputInterrupted` says how many characters were)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from orchestrator.backends.channel import KioskChannel
from orchestrator.errors import InputInterrupted
from sandboxes.keys import check_key

ACTION_DEADLINE = 10.0
TYPE_CHUNK = 32  # characters per `type` request: the seat is checked before each


def _always() -> bool:
    return True


async def in_chunks(
    text: str, send: Callable[[str], Awaitable[Any]], holds_seat: Callable[[], bool]
) -> None:
    """Send `text` a chunk at a time with `send`, while `holds_seat()` (the AI has the
    seat), asked right before each chunk: every surface's long type (the kiosk's and the
    desktop's `type` op, Android's `input text`, WebDriverAgent's keys)."""
    for start in range(0, len(text), TYPE_CHUNK):
        if not holds_seat():
            raise InputInterrupted(
                f"A person took the desktop after {start} of {len(text)} characters were "
                "typed; the rest was not typed. Wait for hand back.",
                typed=start,
            )
        await send(text[start : start + TYPE_CHUNK])


async def type_chunks(
    channel: KioskChannel, text: str, deadline: float, holds_seat: Callable[[], bool]
) -> None:
    """Type `text` over an agent channel a chunk at a time, while the AI has the seat."""

    async def send(part: str) -> None:
        await channel.request("type", deadline, text=part)

    await in_chunks(text, send, holds_seat)


async def channel_input(
    channel: KioskChannel,
    verb: str,
    params: Any,
    *,
    type_deadline: float = ACTION_DEADLINE,
    holds_seat: Callable[[], bool] = _always,
) -> str | None:
    """Send one input (`params` validated already); the sentence that says what was done,
    or None when `verb` is not pointer or keyboard input. A key is sent as its checked
    verdict (`sandboxes.keys.check_key`), never as the model wrote it. `type_deadline`
    bounds each chunk of a type."""
    req = channel.request
    if verb == "click":
        fields = {"x": params.x, "y": params.y, "button": params.button, "double": params.double}
        await req("click", ACTION_DEADLINE, **fields)
        return f"Clicked {params.button} at {params.x},{params.y}."
    if verb == "type":
        await type_chunks(channel, params.text, type_deadline, holds_seat)
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
