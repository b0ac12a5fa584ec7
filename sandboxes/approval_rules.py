"""What makes an action wait for an operator (SPEC S6.1a), pure: on the kiosk and on
every rig (browser, desktop, Android, iOS), each of which reads what its input acts on
and hands it to these functions.

Rules raise approvals, never the model: a navigation to a page listed in `confirm_urls`
(entries written like deny-list entries: a host, which covers its subdomains, or a
`https://host/path` prefix, compared after URL normalisation), and a click whose
target's accessible name contains one of `confirm_words`. Words of scripts written with
spaces between words (Latin, Cyrillic, ...) match whole words, case-insensitively; words
of scripts without spaces (Chinese, Thai, ...) match anywhere in the name. A key that
activates the focused element (Return, KP_Enter, space, with any modifier) and a typed
newline are judged as a click on what they act on (`focus_hold`): the focused element,
and for a text field its form's submit control (a desktop window's default button, on
Android the button after the field).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from sandboxes.masking import deny_matches

Category = Literal["send", "submit", "delete", "purchase", "other"]
CATEGORIES: tuple[Category, ...] = ("send", "submit", "delete", "purchase", "other")

# The default `confirm_words`, each with the category an approval for it carries.
DEFAULT_WORDS: dict[str, Category] = {
    # English
    "send": "send",
    "submit": "submit",
    "confirm": "submit",
    "pay": "purchase",
    "buy": "purchase",
    "place order": "purchase",
    "delete": "delete",
    # Chinese (simplified and traditional)
    "发送": "send",
    "發送": "send",
    "提交": "submit",
    "确认": "submit",
    "確認": "submit",
    "支付": "purchase",
    "付款": "purchase",
    "购买": "purchase",
    "購買": "purchase",
    "下单": "purchase",
    "下單": "purchase",
    "删除": "delete",
    "刪除": "delete",
    # Thai
    "ส่ง": "send",
    "ยืนยัน": "submit",
    "ชำระเงิน": "purchase",
    "จ่าย": "purchase",
    "ซื้อ": "purchase",
    "สั่งซื้อ": "purchase",
    "ลบ": "delete",
}
DEFAULT_CONFIRM_WORDS: tuple[str, ...] = tuple(DEFAULT_WORDS)

MAX_WORD_CHARS = 64
MAX_NAME_CHARS = 200  # the part of an accessible name shown in an approval


def fold(text: str) -> str:
    """Text as compared: NFKC, case-folded, runs of white space as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


_FOLDED_CATEGORY: dict[str, Category] = {fold(w): c for w, c in DEFAULT_WORDS.items()}


def _spaced(word: str) -> bool:
    """Whether the word's script separates words with spaces (then it matches as a whole
    word): any letter from Latin, Greek, Cyrillic, Armenian, Georgian and the like."""
    for char in word:
        if char.isalpha():
            name = unicodedata.name(char, "")
            if name.startswith(("LATIN", "GREEK", "CYRILLIC", "ARMENIAN", "GEORGIAN")):
                return True
    return False


def word_problem(word: str) -> str | None:
    """What is wrong with a confirm word, or None."""
    folded = fold(word)
    if not folded:
        return "must not be empty or only white space"
    if len(folded) > MAX_WORD_CHARS:
        return f"must be at most {MAX_WORD_CHARS} characters"
    if not any(ch.isalnum() for ch in folded):
        return "must contain a letter or a digit"
    return None


def word_in_name(word: str, name: str) -> bool:
    folded_word, folded_name = fold(word), fold(name)
    if not folded_word:
        return False
    if not _spaced(folded_word):
        return folded_word in folded_name
    pattern = r"(?<!\w)" + re.escape(folded_word).replace(r"\ ", r"\s+") + r"(?!\w)"
    return re.search(pattern, folded_name) is not None


@dataclass(frozen=True, slots=True)
class Hold:
    """Why an action must wait for an operator: the rule, its category, one line, and
    the target as read when the rule judged it (bound into the approval,
    sandboxes.approval_binding)."""

    rule: str  # e.g. "confirm_words: pay"
    category: Category
    description: str
    target: Mapping[str, Any] | None = None

    def on(self, target: Mapping[str, Any] | None) -> Hold:
        """This hold, with the target it judged."""
        return replace(self, target=target)


def _quote(name: str) -> str:
    text = " ".join(name.split())
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…"


def click_hold(
    target_name: str | None,
    target_role: str | None,
    words: Sequence[str],
    *,
    href: str | None = None,
    confirm_urls: Iterable[str] = (),
    unknown_reason: str | None = None,
    text: str | None = None,
    doing: str = "Click",
) -> Hold | None:
    """The hold a click (or another input on one element, named by `doing`) needs: its
    target's accessible name, or its visible `text` (an aria-label may say "Cancel" on a
    button that shows "Delete everything"), contains a confirm word, or it is a link to a
    confirm URL; or (when `words` is not empty) its target could not be read at all, which
    is treated as a match: a rule nobody can check holds."""
    if href:
        entry = deny_matches(href, confirm_urls)
        if entry is not None:
            return Hold(
                f"confirm_urls: {entry}", "other", f"{doing} a link to {_quote(href)} ({entry})"
            )
    if not words:
        return None
    if target_name is None:
        why = unknown_reason or "its accessible name could not be read"
        return Hold("confirm_words", "other", f"{doing} an element whose name is unknown ({why})")
    for word in words:
        shown = next((t for t in (target_name, text or "") if word_in_name(word, t)), None)
        if shown is not None:
            target_name = shown
            category = _FOLDED_CATEGORY.get(fold(word), "other")
            role = f"{target_role} " if target_role else ""
            return Hold(
                f"confirm_words: {word}",
                category,
                f"{doing} the {role}“{_quote(target_name)}”",
            )
    return None


# The keys that activate the focused element (a button's or link's default action, a
# form's submission from a text field), with or without modifiers (ctrl+Return ...).
ACTIVATING_KEYS = frozenset({"return", "kp_enter", "enter", "space"})
# Text fields, as each surface names them: CDP's roles (kiosk, browser), AT-SPI's role
# names (desktop), Android's widget classes and iOS's element types (phones).
TEXT_ROLES = frozenset(
    {"textbox", "searchbox", "combobox", "spinbutton", "TextField"}
    | {"entry", "text", "password text", "spin button", "combo box"}
    | {"EditText", "AutoCompleteTextView", "MultiAutoCompleteTextView", "SecureTextField"}
)


def key_activates(key: str) -> bool:
    """Whether pressing this key (or chord, "ctrl+Return") can activate the focused
    element: its last part is Return, KP_Enter or space."""
    last = key.replace(" ", "").split("+")[-1].casefold()
    return last in ACTIVATING_KEYS


def text_activates(text: str) -> bool:
    """Whether typing this text can activate the focused element: it holds a newline
    (typed as Return)."""
    return "\n" in text or "\r" in text


def focus_hold(
    focused: dict[str, Any] | None,
    words: Sequence[str],
    *,
    key: str,
    confirm_urls: Iterable[str] = (),
) -> Hold | None:
    """The hold an activating key (or typed newline) on the focused element needs: judged
    as a click on what it acts on. `focused` is the focused element as read (`name`,
    `role`, `text`, `href`, `error`) with, for a text field, `submit`: its form's submit
    control read the same way (None when it has none). Unread (None, or an `error`) is
    held when a rule could match, as for a click."""
    if not words and not confirm_urls:
        return None
    if focused is None or focused.get("error"):
        why = (focused or {}).get("error") or "the focused element could not be read"
        if not words:
            return None
        return Hold("confirm_words", "other", f"Press {key} on an unknown element ({why})")
    acted = focused
    if focused.get("role") in TEXT_ROLES and focused.get("submit") is not None:
        if key.casefold().endswith("space"):
            return None  # a space in a text field types a space
        acted = focused["submit"]
    hold = click_hold(
        acted.get("name") if acted.get("name") is not None else "",
        acted.get("role"),
        words,
        href=acted.get("href"),
        confirm_urls=confirm_urls,
        text=acted.get("text"),
    )
    if hold is None:
        return None
    what = hold.description.removeprefix("Click ").removeprefix("a link to ")
    return Hold(hold.rule, hold.category, f"Press {key} on {what}")


def navigate_hold(url: str, confirm_urls: Iterable[str]) -> Hold | None:
    """The hold a navigation needs: its URL is covered by a `confirm_urls` entry."""
    entry = deny_matches(url, confirm_urls)
    if entry is None:
        return None
    return Hold(f"confirm_urls: {entry}", "other", f"Open {_quote(url)} ({entry})")


def describe_rules(words: Sequence[str], confirm_urls: Sequence[str], timeout: int) -> str:
    """The start result's sentence on what waits for an operator."""
    parts = []
    if confirm_urls:
        parts.append("opening a page under " + ", ".join(confirm_urls))
    if words:
        shown = ", ".join(words[:12]) + (f" and {len(words) - 12} more" if len(words) > 12 else "")
        parts.append(
            f"a click on an element whose name contains {shown} (or Return, space or a "
            "typed newline on such an element, or in a form whose submit button it is)"
        )
    if not parts:
        return "No action waits for an operator in this session."
    return (
        "These wait for an operator's approval (up to "
        f"{timeout} s; denied if nobody answers): " + "; ".join(parts) + "."
    )
