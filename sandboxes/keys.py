"""Which keys `computer_key` may press (SPEC S2.5, issue: a locked-down kiosk), pure.

A documented allowlist, nothing else: a key or chord outside it is refused with a
message that says what is allowed. Zoom keys (ctrl+plus/minus/0), browser chords
(ctrl+t, ctrl+n, ctrl+l, alt+Left, ...), function keys other than F5 and anything
with alt or super are refused: they open windows the masking probe cannot follow,
change the zoom the mask is drawn at, or leave the page. Text is typed with
computer_type; the audit records only a key's class, never the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

KeyClass = Literal["letter", "digit", "named", "chord"]

# Accepted spelling (lower case) -> the name sent to the kiosk (an X keysym name).
NAMED: dict[str, str] = {
    "return": "Return",
    "enter": "Return",
    "tab": "Tab",
    "escape": "Escape",
    "esc": "Escape",
    "backspace": "BackSpace",
    "delete": "Delete",
    "del": "Delete",
    "space": "space",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "Prior",
    "page_up": "Prior",
    "pagedown": "Next",
    "page_down": "Next",
    "f5": "F5",
}
CTRL_LETTERS = frozenset("acvxz")  # select all, copy, paste, cut, undo
SHIFT_NAMED = frozenset({"Tab", "Up", "Down", "Left", "Right", "Home", "End", "Prior", "Next"})

ALLOWED_TEXT = (
    "letters, digits, Return, Tab, Escape, BackSpace, Delete, space, Up, Down, Left, "
    "Right, Home, End, PageUp, PageDown, F5; chords ctrl+a, ctrl+c, ctrl+v, ctrl+x, "
    "ctrl+z, shift+Tab, and shift with a letter, an arrow, Home, End, PageUp or PageDown"
)


@dataclass(frozen=True, slots=True)
class KeyVerdict:
    allowed: bool
    key: str = ""  # what the kiosk is asked to press
    key_class: KeyClass = "named"
    message: str = ""


def _refuse(key: str, why: str = "") -> KeyVerdict:
    shown = key if len(key) <= 32 else key[:32] + "..."
    return KeyVerdict(
        False,
        message=f"key {shown!r} is not allowed{why}. Allowed: {ALLOWED_TEXT}. "
        "Type text with computer_type.",
    )


def _single(name: str) -> tuple[str, KeyClass] | None:
    if len(name) == 1 and name.isascii() and name.isalpha():
        return name, "letter"
    if len(name) == 1 and name.isascii() and name.isdigit():
        return name, "digit"
    named = NAMED.get(name.lower())
    return (named, "named") if named else None


def check_key(key: str) -> KeyVerdict:
    """Whether `key` is on the allowlist, and the name to press."""
    parts = key.split("+")
    if len(parts) == 1:
        single = _single(key)
        if single is None:
            return _refuse(key)
        return KeyVerdict(True, single[0], single[1])
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return _refuse(key, " (one modifier and one key at most)")
    modifier, rest = parts[0].lower(), parts[1]
    single = _single(rest)
    if modifier in ("ctrl", "control") and len(rest) == 1 and rest.lower() in CTRL_LETTERS:
        return KeyVerdict(True, f"ctrl+{rest.lower()}", "chord")
    if modifier == "shift" and single is not None:
        name, kind = single
        if kind == "letter":
            return KeyVerdict(True, f"shift+{name.lower()}", "chord")
        if name in SHIFT_NAMED:
            return KeyVerdict(True, f"shift+{name}", "chord")
    return _refuse(key)


def key_param(key: str, type_with: str = "computer_type") -> KeyVerdict:
    """`check_key` for a tool's parameter model: the verdict, or a validation error that
    names the `key` field and how this tool types text (`type_with`)."""
    verdict = check_key(key)
    if not verdict.allowed:
        raise ValueError(f"key: {verdict.message.replace('computer_type', type_with)}")
    return verdict
