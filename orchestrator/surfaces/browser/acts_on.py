"""What a browser_use verb acts on, read for the approval rules (issue 22 item 2): the
element of a click, fill or select, and for a press the focused element with, for a text
field, its form's submit control.

An element named by role + name is that role and name; one named by ref has the role and
name the last `extract a11y` snapshot gave it (an aria snapshot taken now would renumber
the agent's refs). Its text, label, value and link URL are read now by Playwright's own
engine (its utility world), and `:focus` is matched there too, never by a page script.
What cannot be read comes back with an `error`, and the rules hold it.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page

READ_MS = 3_000
SUBMIT_CSS = "button:not([type]), button[type=submit i], input[type=submit i], input[type=image i]"
TEXT_FIELD_CSS = (
    ":is(input:not([type=button i], [type=submit i], [type=reset i], [type=image i], "
    "[type=checkbox i], [type=radio i]), textarea, [contenteditable]):focus"
)


def unread(error: str) -> dict[str, Any]:
    return {"name": None, "role": None, "text": None, "href": None, "error": error}


def from_snapshot(snapshot: str, ref: str) -> tuple[str, str] | None:
    """The role and name the snapshot gave `ref` (`- button "Pay now" [ref=e7]`)."""
    pattern = r'^\s*-\s+([A-Za-z]+)(?:\s+"((?:[^"\\]|\\.)*)")?[^\n]*\[ref=' + re.escape(ref) + r"\]"
    match = re.search(pattern, snapshot, re.MULTILINE)
    return (match.group(1), match.group(2) or "") if match else None


async def element(locator: Locator, role: str | None, name: str | None) -> dict[str, Any]:
    """One element as the rules judge it: its role and name as known, its visible text,
    its label and value (a name the page may show) and its link URL, read now."""
    try:
        if await locator.count() != 1:
            return unread("the element is not exactly one on the page")
        text = (await locator.text_content(timeout=READ_MS)) or ""
        label = await locator.get_attribute("aria-label", timeout=READ_MS)
        value = await locator.get_attribute("value", timeout=READ_MS)
        href = await locator.get_attribute("href", timeout=READ_MS)
        box = await locator.bounding_box(timeout=READ_MS)
    except PlaywrightError as exc:
        return unread(f"the element could not be read ({str(exc).splitlines()[0]})")
    bounds = None if box is None else [round(box[k]) for k in ("x", "y", "width", "height")]
    read = {"text": text, "label": label, "value": value, "href": href, "bounds": bounds}
    return judged(read, role, name)


def judged(read: dict[str, Any], role: str | None, name: str | None) -> dict[str, Any]:
    """An element's reading (its text, aria-label, value and href attributes, bounds) as
    the rules judge it: the name it shows, its role, text, link URL, where it is."""
    shown = " ".join(p for p in (name, read.get("label"), read.get("value")) if p)
    text = " ".join(str(read.get("text") or "").split())[:500]
    return {"name": shown, "role": role, "text": text, "href": read.get("href"), "error": None} | {
        "bounds": read.get("bounds")  # where it is: bound into an approval, not judged
    }


async def focused(page: Page) -> dict[str, Any]:
    """The element a key press acts on, and for a text field its form's submit control
    (or the form itself when it has none); None outside a form."""
    try:
        if await page.locator("*:focus").count() == 0:
            return {"name": "", "role": "document", "text": "", "href": None, "error": None}
        if await page.locator("iframe:focus, frame:focus").count() > 0:
            return unread("the focus is inside a frame")
        text_field = await page.locator(TEXT_FIELD_CSS).count() > 0
        in_form = await page.locator("form:has(*:focus)").count() > 0
    except PlaywrightError as exc:
        return unread(f"the focused element could not be read ({str(exc).splitlines()[0]})")
    out = await element(page.locator("*:focus").last, "textbox" if text_field else None, None)
    out["submit"] = None
    if in_form and text_field:
        form = page.locator("form:has(*:focus)").last
        has_submit = await form.locator(SUBMIT_CSS).count() > 0
        control = form.locator(SUBMIT_CSS).first if has_submit else form
        out["submit"] = await element(control, "button" if has_submit else "form", None)
    return out
