"""codrive's parameters (SPEC S3.1): a run is one `target_app` and at most 50 steps.

Every field is checked here, at the edge, with a message naming the step's index and the
field (`steps.3.text: ...`). A step's `action` is always required (it is the rung every
other rung falls back to); `role` and `name` come together; `text` is for `type` only and
never with the `credential` category: no rung ever sends credential text.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from sandboxes.keys import check_key
from sandboxes.params import TYPE_MAX_CHARS, Int, Params

MAX_STEPS = 50
APPS: tuple[str, ...] = ("mousepad", "galculator", "gnome-calculator", "chromium")

Action = Literal["click", "double_click", "type", "key", "scroll", "wait", "take_over"]
RunState = Literal["running", "waiting_approval", "human", "finished", "failed", "stopped"]
StepCategory = Literal["none", "send", "submit", "delete", "purchase", "other", "credential"]
CONSEQUENTIAL: frozenset[str] = frozenset({"send", "submit", "delete", "purchase", "other"})
POINTER_ACTIONS: frozenset[str] = frozenset({"click", "double_click", "scroll"})

Coordinate = Annotated[Int, Field(ge=0, le=4096)]


class Step(Params):
    """One step: `action` always (the last rung), then how to find what it acts on."""

    action: Action
    role: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    name: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    x: Coordinate | None = None
    y: Coordinate | None = None
    text: Annotated[str, Field(min_length=1, max_length=TYPE_MAX_CHARS)] | None = None
    key_name: Annotated[str, Field(min_length=1, max_length=40)] | None = None
    direction: Literal["up", "down", "left", "right"] | None = None
    amount: Annotated[Int, Field(ge=1, le=30)] | None = None
    api_action: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    params: dict[str, Any] | None = None
    category: StepCategory = "none"
    description: Annotated[str, Field(max_length=200)] = ""

    @model_validator(mode="after")
    def _shape(self) -> Step:
        problems: list[str] = []
        if (self.role is None) != (self.name is None):
            problems.append("role and name: give both or neither")
        if (self.x is None) != (self.y is None):
            problems.append("x and y: give both or neither")
        if self.params is not None and self.api_action is None:
            problems.append("params: only with api_action")
        if self.text is not None and self.category == "credential":
            problems.append(
                "text: a credential step never carries text (a person types it: use "
                "action take_over or category credential without text)"
            )
        problems += _action_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def consequential(self) -> bool:
        return self.category in CONSEQUENTIAL

    @property
    def needs_person(self) -> bool:
        return self.action == "take_over" or self.category == "credential"

    def label(self) -> str:
        """What the step does, for approvals and the timeline: never its text or key."""
        if self.role is not None and self.name is not None:
            return f"{self.action} {self.role} {self.name[:120]!r}"
        if self.api_action is not None:
            url = (self.params or {}).get("url")
            return self.api_action + (f" {str(url)[:200]}" if url else "")
        if self.x is not None and self.y is not None:
            return f"{self.action} at {self.x},{self.y}"
        return self.action


def _action_problems(step: Step) -> list[str]:
    action = step.action
    out: list[str] = []
    if action == "type" and step.text is None and step.category != "credential":
        out.append("text: required for action type")
    if action != "type" and step.text is not None:
        out.append(f"text: only for action type, not {action}")
    if action == "key":
        if step.key_name is None:
            out.append("key_name: required for action key")
        else:
            verdict = check_key(step.key_name)
            if not verdict.allowed:
                out.append(f"key_name: {verdict.message}")
    elif step.key_name is not None:
        out.append(f"key_name: only for action key, not {action}")
    if action == "scroll" and step.direction is None:
        out.append("direction: required for action scroll (up, down, left or right)")
    if action not in ("scroll",) and step.direction is not None:
        out.append(f"direction: only for action scroll, not {action}")
    if action == "wait" and step.amount is None:
        out.append("amount: required for action wait (seconds, 1-30)")
    if action not in ("scroll", "wait") and step.amount is not None:
        out.append(f"amount: only for actions scroll and wait, not {action}")
    if action not in POINTER_ACTIONS and step.role is not None:
        out.append(f"role and name: locate is not valid for action {action}")
    if action in ("click", "double_click") and (
        step.role is None and step.x is None and step.api_action is None
    ):
        out.append(f"{action}: needs role + name, x + y or an api_action to act on")
    if action in ("wait", "take_over") and (step.x is not None or step.api_action is not None):
        out.append(f"{action}: takes no x/y and no api_action")
    return out


class CodriveRunParams(Params):
    target_app: Annotated[
        str, Field(min_length=1, max_length=64, description="The one app this run drives.")
    ]
    steps: Annotated[
        list[Step],
        Field(min_length=1, max_length=MAX_STEPS, description="1-50 steps, run in order."),
    ]
    watch_mode: Annotated[bool, Field(description="Wait for the app to be idle after each.")] = (
        False
    )

    @model_validator(mode="after")
    def _app(self) -> CodriveRunParams:
        if self.target_app not in APPS:
            raise ValueError(
                f"target_app: {self.target_app!r} is not on the desktop; one of: " + ", ".join(APPS)
            )
        return self


class CodriveStatusParams(Params):
    run_id: Annotated[str, Field(min_length=1, max_length=64)] | None = None
