"""What a call does, in one line, for approvals and the timeline (pure): never the text
typed or the key pressed."""

from __future__ import annotations

from typing import Any

from sandboxes.codrive import Step
from sandboxes.params import ClickParams, NavigateParams


def step_of(tool: str, params: Any) -> str:
    """What a call does, for approvals and the timeline: never the text typed or the key."""
    if params is None:
        return tool.removeprefix("computer_")
    if isinstance(params, ClickParams):
        kind = "double-click" if params.double else "click"
        return f"{params.button} {kind} at {params.x},{params.y}"
    if isinstance(params, NavigateParams):
        return f"open {params.url[:300]}"
    if isinstance(params, Step):
        return f"codrive {params.label()}"
    verb = getattr(params, "verb", None)
    if isinstance(verb, str):  # a rig's verb: what it acts on, never its text
        named = getattr(params, "ref", None) or getattr(params, "name", None)
        return f"{tool} {verb}" + (f" {str(named)[:200]}" if named else "")
    return tool.removeprefix("computer_")
