"""What makes a kiosk action wait for an operator (sandboxes/approval_rules.py)."""

from __future__ import annotations

import pytest

import sandboxes.approval_rules as ar
from orchestrator.config import ComputerUseConfig
from sandboxes.approval_rules import (
    DEFAULT_CONFIRM_WORDS,
    click_hold,
    describe_rules,
    navigate_hold,
    word_in_name,
    word_problem,
)

pytestmark = pytest.mark.unit

WORDS = list(DEFAULT_CONFIRM_WORDS)


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("Send", "send"),
        ("send message", "send"),
        ("SUBMIT", "submit"),
        ("Pay now", "purchase"),
        ("Buy it", "purchase"),
        ("Place   order", "purchase"),
        ("Delete account", "delete"),
        ("Confirm", "submit"),
        ("立即支付", "purchase"),
        ("發送", "send"),
        ("删除文件", "delete"),
        ("ยืนยันการสั่งซื้อ", "submit"),
        ("ชำระเงิน", "purchase"),
    ],
)
def test_the_default_words_hold_clicks_in_english_chinese_and_thai(
    name: str, category: str
) -> None:
    hold = click_hold(name, "button", WORDS)
    assert hold is not None and hold.category == category
    assert hold.rule.startswith("confirm_words: ")
    assert name.split()[0] in hold.description or "“" in hold.description


@pytest.mark.parametrize(
    "name", ["Sender settings", "Payment history", "Buyer's guide", "Next", ""]
)
def test_latin_words_match_whole_words_only(name: str) -> None:
    assert click_hold(name, "button", WORDS) is None


def test_an_unreadable_target_holds_when_words_apply_and_not_otherwise() -> None:
    hold = click_hold(None, None, WORDS, unknown_reason="the kiosk could not tell")
    assert hold is not None and "could not tell" in hold.description
    assert click_hold(None, None, []) is None


def test_a_link_to_a_confirm_url_holds_whatever_its_name() -> None:
    hold = click_hold(
        "Continue",
        "link",
        [],
        href="https://Shop.Example:443/./checkout/x",
        confirm_urls=["https://shop.example/checkout"],
    )
    assert hold is not None and hold.rule == "confirm_urls: https://shop.example/checkout"


def test_navigation_holds_after_normalisation_and_covers_subdomains() -> None:
    rules = ["https://shop.example/checkout", "bank.example"]
    assert navigate_hold("https://shop.example//checkout/pay", rules) is not None
    assert navigate_hold("https://shop.example/%63heckout", rules) is not None
    assert navigate_hold("https://www.bank.example/", rules) is not None
    assert navigate_hold("https://shop.example/cart", rules) is None


def test_words_are_checked_at_the_config_edge() -> None:
    assert word_problem("  ") is not None
    assert word_problem("x" * 65) is not None
    assert word_problem("!!!") is not None
    with pytest.raises(ValueError, match="confirm word"):
        ComputerUseConfig(confirm_words=["ok", " "])
    assert ComputerUseConfig().confirm_words == WORDS
    assert ComputerUseConfig(confirm_words=[]).confirm_words == []


def test_case_and_width_are_folded() -> None:
    assert word_in_name("pay", "\uff30\uff21\uff39 now")  # full-width letters


def test_the_start_result_says_which_rules_apply() -> None:
    text = describe_rules(["pay"], ["https://shop.example/checkout"], 120)
    assert "120 s" in text and "pay" in text and "shop.example/checkout" in text
    assert "No action waits" in describe_rules([], [], 120)


# ---------------------------------------------------------------- keys on the focus
@pytest.mark.parametrize("key", ["Return", "KP_Enter", "space", "ctrl+Return", "shift+space"])
def test_activating_keys(key: str) -> None:
    assert ar.key_activates(key)


@pytest.mark.parametrize("key", ["Tab", "a", "ctrl+c", "Escape", "Down"])
def test_keys_that_do_not_activate(key: str) -> None:
    assert not ar.key_activates(key)


def test_a_typed_newline_activates() -> None:
    assert ar.text_activates("hello\n") and ar.text_activates("a\rb")
    assert not ar.text_activates("hello")


def _el(name: str | None, role: str, **extra: object) -> dict[str, object]:
    return {"name": name, "role": role, "text": "", "href": None, "error": None, **extra}


def test_return_on_a_focused_button_is_judged_by_its_name() -> None:
    hold = ar.focus_hold(_el("Pay now", "button"), WORDS, key="Return")
    assert hold is not None and hold.rule == "confirm_words: pay"
    assert "Pay now" in hold.description and hold.description.startswith("Press Return")
    assert ar.focus_hold(_el("Next", "button"), WORDS, key="Return") is None


def test_return_in_a_text_field_is_judged_by_its_forms_submit_control() -> None:
    field = _el("Amount", "textbox", submit=_el("Send money", "button"))
    hold = ar.focus_hold(field, WORDS, key="Return")
    assert hold is not None and hold.category == "send"
    assert ar.focus_hold(field, WORDS, key="space") is None  # a space types a space
    alone = _el("Amount", "textbox", submit=None)
    assert ar.focus_hold(alone, WORDS, key="Return") is None


def test_visible_text_of_the_focused_control_counts() -> None:
    button = _el("Cancel", "button", text="Delete everything")
    assert ar.focus_hold(button, WORDS, key="space") is not None


def test_an_unread_focus_is_held_and_no_rule_holds_nothing() -> None:
    unread = {"name": None, "error": "the focus is inside a frame the kiosk cannot read"}
    hold = ar.focus_hold(unread, WORDS, key="Return")
    assert hold is not None and "cannot read" in hold.description
    assert ar.focus_hold(None, WORDS, key="Return") is not None
    assert ar.focus_hold(unread, (), key="Return") is None


def test_return_on_a_link_to_a_confirm_url_is_held() -> None:
    link = _el("Docs", "link", href="https://bank.example/transfer")
    hold = ar.focus_hold(link, (), key="Return", confirm_urls=["bank.example"])
    assert hold is not None and hold.rule == "confirm_urls: bank.example"
