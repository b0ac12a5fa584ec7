"""Input through XTest (python-xlib): clicks, scrolls, key chords and typed text.

Every method validates its request fields, sends the events and flushes; it returns at
once (callers read effects back by polling)."""

from __future__ import annotations

import collections
from typing import Any

from Xlib import XK, X
from Xlib.ext import xtest
from Xlib.protocol import request

from .common import OpError

KEYSYM_RETURN: int = XK.XK_Return
KEYSYM_TAB: int = XK.XK_Tab
KEYSYM_SHIFT: int = XK.XK_Shift_L

# The gateway sends keys as `sandboxes.keys.check_key` normalised them: X keysym names,
# chords with ctrl or shift only. No alias table here (one list of spellings, there).
MODIFIERS: dict[str, int] = {"ctrl": XK.XK_Control_L, "shift": XK.XK_Shift_L}


def char_keysym(ch: str) -> int:
    if ch in "\n\r":
        return KEYSYM_RETURN
    if ch == "\t":
        return KEYSYM_TAB
    cp = ord(ch)
    if 0x20 <= cp <= 0x7E or 0xA0 <= cp <= 0xFF:
        return cp
    return 0x01000000 | cp


def key_keysym(name: str) -> int:
    if len(name) == 1:
        return char_keysym(name)
    candidates = [name, name.capitalize()]
    for cand in candidates:
        keysym: int = XK.string_to_keysym(cand)
        if keysym:
            return keysym
    raise OpError(f"unknown key {name!r}")


class XInput:
    """XTest input on one Xlib display of `width` x `height` pixels."""

    def __init__(self, d: Any, width: int, height: int) -> None:
        if not d.has_extension("XTEST"):
            raise OpError("the X server has no XTEST extension")
        self.d = d
        self.width = width
        self.height = height
        first: int = d.display.info.min_keycode
        count = d.display.info.max_keycode - first + 1
        mapping = d.get_keyboard_mapping(first, count)
        self._spare: list[int] = [first + i for i, syms in enumerate(mapping) if not any(syms)]
        self._spare_assigned: collections.OrderedDict[int, int] = collections.OrderedDict()
        self._keysyms_per_code: int = len(mapping[0]) if mapping else 2

    def _xy(self, req: dict[str, Any]) -> tuple[int, int]:
        try:
            x, y = int(req["x"]), int(req["y"])
        except (KeyError, TypeError, ValueError):
            raise OpError("x and y must be integers") from None
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise OpError(f"({x}, {y}) is outside the {self.width}x{self.height} screen")
        return x, y

    def _press_at(self, x: int, y: int, button: int, times: int) -> None:
        xtest.fake_input(self.d, X.MotionNotify, x=x, y=y)
        for _ in range(times):
            xtest.fake_input(self.d, X.ButtonPress, button)
            xtest.fake_input(self.d, X.ButtonRelease, button)
        self.d.flush()

    def move(self, req: dict[str, Any]) -> None:
        self._press_at(*self._xy(req), button=1, times=0)

    def click(self, req: dict[str, Any]) -> None:
        button = {"left": 1, "middle": 2, "right": 3}.get(str(req.get("button") or "left"))
        if button is None:
            raise OpError("button must be left or right")
        double = req.get("double") in (True, "true", 1)
        self._press_at(*self._xy(req), button=button, times=2 if double else 1)

    def scroll(self, req: dict[str, Any]) -> None:
        """Wheel steps up, down, left or right (X buttons 4-7), 1-100 of them (the
        gateway's parameter models bound them tighter)."""
        direction = str(req.get("direction") or "down")
        button = {"up": 4, "down": 5, "left": 6, "right": 7}.get(direction)
        if button is None:
            raise OpError("direction must be up, down, left or right")
        amount = int(req.get("amount") or 3)
        if not 1 <= amount <= 100:
            raise OpError("amount must be 1..100")
        self._press_at(*self._xy(req), button=button, times=amount)

    def drag(self, req: dict[str, Any]) -> None:
        """Press the left button at (x, y), move in ten steps to (to_x, to_y), release."""
        x, y = self._xy(req)
        to_x, to_y = self._xy({"x": req.get("to_x"), "y": req.get("to_y")})
        xtest.fake_input(self.d, X.MotionNotify, x=x, y=y)
        xtest.fake_input(self.d, X.ButtonPress, 1)
        steps = 10
        for i in range(1, steps + 1):
            step_x, step_y = x + (to_x - x) * i // steps, y + (to_y - y) * i // steps
            xtest.fake_input(self.d, X.MotionNotify, x=step_x, y=step_y)
        xtest.fake_input(self.d, X.ButtonRelease, 1)
        self.d.flush()

    def clear_selections(self) -> None:
        """CLIPBOARD and PRIMARY owned by nobody: what a person copied during a take over
        (an OTP, a password) is gone at hand back; its owner is told and drops it."""
        for name in ("CLIPBOARD", "PRIMARY"):
            request.SetSelectionOwner(
                display=self.d.display,
                window=X.NONE,
                selection=self.d.intern_atom(name),
                time=X.CurrentTime,
            )
        self.d.sync()

    def _keycode_for(self, keysym: int, new_map: dict[int, int]) -> tuple[int, bool] | None:
        """(keycode, needs shift) for keysym in the current map, or None."""
        if keysym in self._spare_assigned:
            self._spare_assigned.move_to_end(keysym)
            return self._spare_assigned[keysym], False
        if keysym in new_map:
            return new_map[keysym], False
        for code, index in self.d.keysym_to_keycodes(keysym):
            if index in (0, 1):
                return code, index == 1
        return None

    def type_text(self, req: dict[str, Any]) -> str:
        """XTest key events for req["text"]. Characters without a keycode get a spare keycode
        remapped for them (kept assigned afterwards, least recently used reassigned first,
        never reverted while the events may still be in flight). Returns the tail of the text
        beyond the spare pool, not typed (empty when all of it was); the X server has
        processed every event sent when it is not empty."""
        text = req.get("text")
        if not isinstance(text, str) or not text:
            raise OpError("text must be a non-empty string")
        shift = self.d.keysym_to_keycode(KEYSYM_SHIFT)
        plan: list[tuple[int, bool]] = []
        new_map: dict[int, int] = {}
        in_use: set[int] = set()
        overflow_at: int | None = None
        for pos, ch in enumerate(text):
            keysym = char_keysym(ch)
            found = self._keycode_for(keysym, new_map)
            if found is None:
                free = [
                    c
                    for c in self._spare
                    if c not in self._spare_assigned.values() and c not in new_map.values()
                ]
                if free:
                    code = free[0]
                else:
                    # reuse the least recently used assignment not needed by this text
                    victims = [k for k, c in self._spare_assigned.items() if c not in in_use]
                    if not victims:
                        overflow_at = pos
                        break
                    code = self._spare_assigned.pop(victims[0])
                new_map[keysym] = code
                found = (code, False)
            in_use.add(found[0])
            plan.append(found)
        if new_map:
            for keysym, code in new_map.items():
                syms = [keysym, keysym] + [0] * max(0, self._keysyms_per_code - 2)
                self.d.change_keyboard_mapping(code, [syms])
                self._spare_assigned[keysym] = code
            self.d.sync()
        for code, needs_shift in plan:
            if needs_shift:
                xtest.fake_input(self.d, X.KeyPress, shift)
            xtest.fake_input(self.d, X.KeyPress, code)
            xtest.fake_input(self.d, X.KeyRelease, code)
            if needs_shift:
                xtest.fake_input(self.d, X.KeyRelease, shift)
        self.d.flush()
        if overflow_at is None:
            return ""
        self.d.sync()
        return text[overflow_at:]

    def key(self, req: dict[str, Any]) -> None:
        """A chord such as `ctrl+s`, `shift+Tab`, `Return` (X keysym names plus aliases)."""
        spec = req.get("key")
        if not isinstance(spec, str) or not spec.strip():
            raise OpError("key must be a non-empty string")
        parts = spec.strip().split("+")
        if parts[-1] == "" and len(parts) >= 2:  # "ctrl++" means ctrl and plus
            parts = [*parts[:-2], "plus"]
        mods: list[int] = []
        for part in parts[:-1]:
            modifier = MODIFIERS.get(part.strip().lower())
            if modifier is None:
                raise OpError(f"unknown modifier {part!r}")
            mods.append(self.d.keysym_to_keycode(modifier))
        keysym = key_keysym(parts[-1].strip())
        found = self._keycode_for(keysym, {})
        if found is None:
            raise OpError(f"key {parts[-1]!r} has no keycode on this keyboard")
        code, needs_shift = found
        shift = self.d.keysym_to_keycode(KEYSYM_SHIFT)
        if needs_shift and shift not in mods:
            mods.append(shift)
        for mod in mods:
            xtest.fake_input(self.d, X.KeyPress, mod)
        xtest.fake_input(self.d, X.KeyPress, code)
        xtest.fake_input(self.d, X.KeyRelease, code)
        for mod in reversed(mods):
            xtest.fake_input(self.d, X.KeyRelease, mod)
        self.d.flush()
