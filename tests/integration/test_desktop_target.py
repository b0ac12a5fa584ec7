"""The desktop agent's `target` and `focus_target` ops (rig_images/desktop/desktop_target.py),
which the approval rules read for computer_use (issue 22 item 2), on the real image with
the rig's hardening, on its GTK apps: a button, an open menu's item, openbox's own root
menu, the empty desktop, and the focused text view. (Chromium's page: the e2e attack test,
tests/e2e/test_rules_everywhere.py.)"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from tests.helpers import wait_until
from tests.integration.conftest import desktop_rig

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
async def desktop(backend: DockerBackend) -> AsyncIterator[KioskChannel]:
    async with desktop_rig(backend, "target", ("mousepad", "galculator")) as channel:
        yield channel


async def centre(desktop: KioskChannel, app: str, role: str, name: str) -> tuple[int, int]:
    async def found() -> tuple[int, int] | None:
        where = await desktop.request("locate", 10, app=app, role=role, name=name)
        return tuple(where["center"]) if where.get("center") else None  # type: ignore[return-value]

    point: tuple[int, int] = await wait_until(found, limit=30)
    return point


async def target(desktop: KioskChannel, x: int, y: int) -> dict[str, Any]:
    return await desktop.request("target", 3, x=x, y=y)


async def test_a_gtk_button_is_named_as_its_accessible_name(desktop: KioskChannel) -> None:
    x, y = await centre(desktop, "galculator", "button", "7")
    hit = await target(desktop, x, y)
    assert (hit["name"], hit["error"]) == ("7", None), hit
    assert hit["role"].endswith("button"), hit


async def test_an_open_menus_item_is_read_through_its_pop_up(desktop: KioskChannel) -> None:
    x, y = await centre(desktop, "mousepad", "menu", "File")
    closed = await target(desktop, x, y)
    assert (closed["name"], closed["role"], closed["text"]) == ("File", "menu", ""), closed
    await desktop.request("click", 10, x=x, y=y, button="left", double=False)
    qx, qy = await centre(desktop, "mousepad", "menu item", "Quit")
    item = await target(desktop, qx, qy)
    assert item["name"].strip() == "Quit" and item["role"] == "menu item", item
    await desktop.request("key", 10, key="Escape")

    async def closed_again() -> bool:  # the pop-up's pointer grab is gone for the next test
        return (await target(desktop, qx, qy))["role"] != "menu item"

    await wait_until(closed_again, limit=30)


async def test_the_empty_desktop_and_openboxs_menu_hold_nothing(desktop: KioskChannel) -> None:
    corners = [(2, 2), (1277, 2), (2, 797), (1277, 797)]
    empty = [p for p in corners if (await target(desktop, *p))["role"] == "desktop"]
    assert empty, "some corner of the desktop is empty"
    x, y = empty[0]
    inside = (x + 15 if x < 640 else x - 15, y + 8 if y < 400 else y - 8)

    async def menu_shown() -> dict[str, Any] | None:
        hit = await target(desktop, *inside)
        return hit if hit["role"] == "window manager" else None

    # A right click on the root opens openbox's menu; one that a pop-up's pointer grab
    # took instead (it only closes the pop-up) is followed by another, at most three.
    hit = None
    for _ in range(3):
        await desktop.request("click", 10, x=x, y=y, button="right", double=False)
        with contextlib.suppress(TimeoutError):
            hit = await wait_until(menu_shown, limit=10)
            break
    assert hit is not None, "openbox's menu did not open on a right click on the desktop"
    assert (hit["name"], hit["error"]) == ("", None)
    await desktop.request("key", 10, key="Escape")


async def test_the_focused_text_view_is_read(desktop: KioskChannel) -> None:
    """Mousepad's text view (found below its File menu by `target` itself), clicked, is
    the focused element: a text field with no form and no default button."""
    x, y = await centre(desktop, "mousepad", "menu", "File")
    below = [(x, y + dy) for dy in range(40, 400, 20)]
    roles = [((await target(desktop, *p))["role"], p) for p in below]
    text = next((p for role, p in roles if role == "text"), None)
    assert text is not None, f"Mousepad's text view is below its menu bar: {roles}"
    await desktop.request("click", 10, x=text[0], y=text[1], button="left", double=False)

    async def focused() -> dict[str, Any] | None:
        hit = await desktop.request("focus_target", 3)
        return hit if hit.get("role") == "text" else None

    hit = await wait_until(focused, limit=30)
    assert hit["error"] is None and hit["submit"] is None, hit
