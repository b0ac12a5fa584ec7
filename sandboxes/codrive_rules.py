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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandboxes import approval_rules as rules
from sandboxes.approval_rules import Category, Hold
from sandboxes.codrive import Step

PASTE_KEYS = frozenset({"ctrl+v", "shift+Insert"})
CONSEQUENTIAL_CATEGORY: dict[str, Category] = {c: c for c in rules.CATEGORIES}


@dataclass(frozen=True, slots=True)
class StepTarget:
    """What a step acts on, read from the desktop just before it is judged, as every
    channel surface reads it (`{name, role, text, href, error}`, the focus with `submit`:
    the desktop agent's `target` and `focus_target` ops, or codrive's `locate`).

    `element`: what the pointer acts on (located, or under x/y); `focused`: the focused
    element, for a key or typed text; None with `unread` saying why when nothing could
    be read. `url`: a URL the step opens (api_action open_url)."""

    element: Mapping[str, Any] | None = None
    focused: Mapping[str, Any] | None = None
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
        opened = rules.navigate_hold(target.url, confirm_urls)
        if opened is not None:
            return opened
    if points_at_element(step):
        element = target.element or {}
        return rules.click_hold(
            element.get("name"),
            element.get("role"),
            words,
            href=element.get("href"),
            confirm_urls=confirm_urls,
            unknown_reason=element.get("error") or target.unread or None,
            text=element.get("text"),
            doing="Double-click" if step.action == "double_click" else "Click",
        )
    key = _activating_key(step)
    if key is None:
        return None
    focused = dict(target.focused) if target.focused is not None else None
    if focused is None:
        focused = {"name": None, "error": target.unread or "the focus could not be read"}
    return rules.focus_hold(focused, words, key=key, confirm_urls=confirm_urls)


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
    if step.action == "key" and step.key_name is not None and rules.key_activates(step.key_name):
        return step.key_name
    if step.action == "type" and step.text is not None and rules.text_activates(step.text):
        return "Return"
    return None


def types_text(step: Step) -> bool:
    """Whether the step writes text into the focused field: typed text, or a paste."""
    if step.action == "type" and step.text is not None:
        return True
    return step.action == "key" and (step.key_name or "").casefold() in {
        k.casefold() for k in PASTE_KEYS
    }


def _doing(step: Step, target: StepTarget) -> str:
    element = target.element
    if element is not None and element.get("name"):
        return f"{step.action} the {element.get('role')} “{str(element['name'])[:80]}”"
    if target.url is not None:
        return f"open {target.url[:200]}"
    if step.api_action is not None:
        return f"{step.api_action} ({step.action})"
    return step.action
