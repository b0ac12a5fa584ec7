"""What makes a codrive step wait for an operator (issue 22 item 3), pure.

The rules are every surface's (`sandboxes.approval_rules`): `confirm_words` on the
accessible name of what the step acts on, `confirm_urls` on a URL it opens, an activating
key or a typed newline judged on the focused element. They are judged on what the desktop
reads, never on the model's words: the located element's own name (not the step's
`name`), the element under the pointer, the focused element. What cannot be read is held,
as a kiosk click whose target cannot be read is. A step's `category` can add an approval
(send, submit, delete, purchase, other), never remove one.

The approval says what corral read; the model's own `description` stands beside it,
labelled as the agent's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sandboxes.approval_rules import (
    Category,
    Hold,
    click_hold,
    key_activates,
    navigate_hold,
    text_activates,
)
from sandboxes.codrive import Step

# AT-SPI roles of a field that takes text on one line: Return there activates the
# window's default button or the form's submit control, which AT-SPI does not name.
SINGLE_LINE_ROLES = frozenset({"text", "entry", "password text", "spin button", "combo box"})
PASTE_KEYS = frozenset({"ctrl+v", "shift+Insert"})
CONSEQUENTIAL_CATEGORY: dict[str, Category] = {
    "send": "send",
    "submit": "submit",
    "delete": "delete",
    "purchase": "purchase",
    "other": "other",
}


@dataclass(frozen=True, slots=True)
class Element:
    """One element as the desktop's accessibility tree reads it."""

    role: str
    name: str
    multi_line: bool = False  # a text role that takes several lines (Return is a newline)


@dataclass(frozen=True, slots=True)
class StepTarget:
    """What a step acts on, read from the desktop just before it is judged.

    `element`: the element the pointer acts on (located, or under x/y); `focused`: the
    focused element, for a key or typed text; None with `unread` saying why when it could
    not be read. `url`: a URL the step opens (api_action open_url)."""

    element: Element | None = None
    focused: Element | None = None
    unread: str = ""
    url: str | None = None


def step_hold(
    step: Step,
    app: str,
    target: StepTarget,
    words: Sequence[str],
    confirm_urls: Sequence[str],
) -> Hold | None:
    """The hold this step needs: a rule on what it acts on, else its category."""
    hold = _rule_hold(step, target, words, confirm_urls)
    if hold is None and step.consequential:
        category = CONSEQUENTIAL_CATEGORY[step.category]
        hold = Hold(f"category: {step.category}", category, f"{_doing(step, target)} in {app}")
    if hold is None:
        return None
    said = " ".join(step.description.split())
    if said:
        return Hold(hold.rule, hold.category, f"{hold.description} (the agent says: “{said}”)")
    return hold


def _rule_hold(
    step: Step, target: StepTarget, words: Sequence[str], confirm_urls: Sequence[str]
) -> Hold | None:
    if target.url is not None:
        opened = navigate_hold(target.url, confirm_urls)
        if opened is not None:
            return opened
    if points_at_element(step):
        element = target.element
        return click_hold(
            element.name if element is not None else None,
            element.role if element is not None else None,
            words,
            unknown_reason=target.unread or None,
            doing="Double-click" if step.action == "double_click" else "Click",
        )
    key = _activating_key(step)
    if key is None:
        return None
    return focused_hold(target.focused, key, words, target.unread)


def points_at_element(step: Step) -> bool:
    """Whether the step may activate an element with the pointer or an AT-SPI action: a
    widget api action, or a click with a role and name or x/y to fall back to (an
    api_action such as open_url falls back to them when it cannot act)."""
    if step.api_action in ("press", "activate"):
        return True
    clicks = step.action in ("click", "double_click")
    return clicks and (step.role is not None or step.x is not None)


def _activating_key(step: Step) -> str | None:
    """The key a step presses that can activate the focused element, if any."""
    if step.api_action is not None:
        return None
    if step.action == "key" and step.key_name is not None and key_activates(step.key_name):
        return step.key_name
    if step.action == "type" and step.text is not None and text_activates(step.text):
        return "Return"
    return None


def focused_hold(
    focused: Element | None, key: str, words: Sequence[str], unread: str = ""
) -> Hold | None:
    """An activating key on the focused element, judged as a click on what it acts on;
    in a one-line text field that is the default button or submit control, which the
    accessibility tree does not name: held when a rule could match."""
    if not words:
        return None
    if focused is None:
        why = unread or "the focused element could not be read"
        return Hold("confirm_words", "other", f"Press {key} on an unknown element ({why})")
    if focused.role in SINGLE_LINE_ROLES and not focused.multi_line:
        if key.casefold().endswith("space"):
            return None  # a space in a text field types a space
        return Hold(
            "confirm_words",
            "other",
            f"Press {key} in the {focused.role} “{focused.name[:80]}”: what it submits "
            "cannot be read",
        )
    if focused.multi_line:
        return None  # Return in a multi-line text is a new line
    hold = click_hold(focused.name, focused.role, words)
    if hold is None:
        return None
    what = hold.description.removeprefix("Click ")
    return Hold(hold.rule, hold.category, f"Press {key} on {what}")


def types_text(step: Step) -> bool:
    """Whether the step writes text into the focused field: typed text, or a paste."""
    if step.action == "type" and step.text is not None:
        return True
    return step.action == "key" and (step.key_name or "").casefold() in {
        k.casefold() for k in PASTE_KEYS
    }


def _doing(step: Step, target: StepTarget) -> str:
    element = target.element
    if element is not None:
        return f"{step.action} the {element.role} “{element.name[:80]}”"
    if target.url is not None:
        return f"open {target.url[:200]}"
    if step.api_action is not None:
        return f"{step.api_action} ({step.action})"
    return step.action
