"""codrive's rules (sandboxes/codrive_rules.py), pure: judged on what the step acts on as
the desktop reads it, never on the model's words; a category adds an approval, never
removes one; what cannot be read is held."""

from __future__ import annotations

from typing import Any

import pytest

from sandboxes.approval_rules import DEFAULT_CONFIRM_WORDS
from sandboxes.codrive import Step
from sandboxes.codrive_rules import StepTarget, step_hold, types_text

pytestmark = pytest.mark.unit


def el(role: str, name: str, **more: Any) -> dict[str, Any]:
    """An element as the desktop agent's `target` / `focus_target` ops answer."""
    return {"role": role, "name": name, "text": None, "href": None, "error": None, **more}


WORDS = DEFAULT_CONFIRM_WORDS


def hold(step: dict[str, Any], target: StepTarget, urls: tuple[str, ...] = ()) -> Any:
    return step_hold(Step(**step), "chromium", target, WORDS, urls)


def test_the_located_elements_own_name_is_judged_not_the_steps() -> None:
    """The model names a harmless button; the element found is "Delete everything"."""
    step = {"action": "click", "role": "button", "name": "Next"}
    found = hold(step, StepTarget(el("push button", "Delete everything")))
    assert found is not None and found.rule == "confirm_words: delete"
    assert "Delete everything" in found.description
    assert hold(step, StepTarget(el("push button", "Next"))) is None


def test_a_category_adds_an_approval_and_none_removes_nothing() -> None:
    sent = hold(
        {"action": "click", "x": 5, "y": 5, "category": "send"},
        StepTarget(el("push button", "OK")),
    )
    assert sent is not None and sent.category == "send"
    deleted = hold(
        {"action": "click", "x": 5, "y": 5, "category": "none"},
        StepTarget(el("push button", "Delete")),
    )
    assert deleted is not None and deleted.category == "delete"


def test_what_cannot_be_read_is_held() -> None:
    unread = hold({"action": "click", "x": 5, "y": 5}, StepTarget(unread="no window there"))
    assert unread is not None and "no window there" in unread.description
    key = hold({"action": "key", "key_name": "Return"}, StepTarget())
    assert key is not None and "unknown element" in key.description


def test_activating_keys_and_newlines_are_judged_on_the_focused_element() -> None:
    on_button = StepTarget(focused=el("push button", "Send message"))
    assert hold({"action": "key", "key_name": "space"}, on_button) is not None
    assert hold({"action": "type", "text": "hi\n"}, on_button) is not None
    assert hold({"action": "type", "text": "hi"}, on_button) is None  # no newline
    field = StepTarget(focused=el("textbox", "Search", submit=el("push button", "Send")))
    submitted = hold({"action": "key", "key_name": "Return"}, field)
    assert submitted is not None and "Send" in submitted.description
    assert hold({"action": "key", "key_name": "space"}, field) is None
    unread = StepTarget(focused={"name": None, "error": "AT-SPI did not answer"})
    held = hold({"action": "type", "text": "x\n"}, unread)
    assert held is not None and "AT-SPI did not answer" in held.description


def test_a_url_the_step_opens_is_judged_by_confirm_urls() -> None:
    step = {"action": "click", "api_action": "open_url", "params": {"url": "https://shop.test/PAY"}}
    found = hold(step, StepTarget(url="https://shop.test/PAY"), ("https://shop.test/pay",))
    assert found is not None and found.rule.startswith("confirm_urls")


def test_the_agents_words_stand_beside_corrals_reading_labelled() -> None:
    step = {"action": "click", "role": "button", "name": "Next", "description": "go on"}
    found = hold(step, StepTarget(el("push button", "Pay now")))
    assert found is not None
    assert found.description.startswith("Click the push button “Pay now”")
    assert "(the agent says: “go on”)" in found.description


def test_typing_and_pasting_are_text_into_the_focused_field() -> None:
    assert types_text(Step(action="type", text="x"))
    assert types_text(Step(action="key", key_name="ctrl+v"))
    assert not types_text(Step(action="key", key_name="Tab"))
