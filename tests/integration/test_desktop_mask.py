"""The desktop rig's screenshot fails closed for a window whose application is not on the
accessibility bus (rig_images/desktop/desktop_windows.py): its password fields cannot be
read, so the agent names it and the gateway masks the whole screen. Attacks on the real
image with the rig's hardening: a second Mousepad started without the accessibility
bridge (as an application is in the moment between its window mapping and its
registration), and a bare X client's pop-up that names no process. A registered
application's own pop-up (Mousepad's File menu) is no such window.

Before, the mask walked only the applications AT-SPI listed: both screens were answered
"no password field", unmasked (measured on the image, with two Mousepad windows shown)."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from typing import Any

import docker
import pytest

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from tests.helpers import wait_until
from tests.integration.conftest import desktop_rig

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# A bare X client (python-xlib, in the image): a mapped override-redirect window with no
# _NET_WM_PID, kept until its stdin closes.
BARE_POPUP = """
import sys
from Xlib import X, display
d = display.Display(":99")
s = d.screen()
w = s.root.create_window(100, 100, 300, 200, 0, s.root_depth, X.InputOutput,
                         X.CopyFromParent, background_pixel=s.white_pixel,
                         override_redirect=True)
w.map()
d.sync()
print("mapped", flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
async def desktop(backend: DockerBackend) -> AsyncIterator[KioskChannel]:
    async with desktop_rig(backend, "mask", ("mousepad",)) as channel:
        yield channel


async def probe(desktop: KioskChannel) -> dict[str, Any]:
    shot = await desktop.request("screenshot", 10)
    return dict(shot["probe"])


async def clear(desktop: KioskChannel) -> None:
    """Until the screenshot needs no whole-screen mask (every window's app registered)."""

    async def unmasked() -> bool:
        return (await probe(desktop))["error"] is None

    await wait_until(unmasked, limit=60)


def run_in(desktop: KioskChannel, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
    """A process in the rig as its user, outside corral (the attacker's application)."""
    return subprocess.Popen(
        ["docker", "exec", "-i", "-u", "1000:1000", "-e", "DISPLAY=:99", desktop.id, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        **kw,
    )


async def test_a_window_whose_app_is_not_on_the_bus_masks_the_screen(
    desktop: KioskChannel, docker_client: docker.DockerClient
) -> None:
    await clear(desktop)
    shown = len((await desktop.request("windows", 5))["windows"])
    hidden = run_in(desktop, ["env", "NO_AT_BRIDGE=1", "mousepad", "--disable-server"])
    try:

        async def mapped() -> bool:
            return len((await desktop.request("windows", 5))["windows"]) > shown

        await wait_until(mapped, limit=60)
        error = (await probe(desktop))["error"]
        assert error and "not on the AT-SPI accessibility bus" in error, error
        assert "Mousepad" in error, error
    finally:
        container = docker_client.containers.get(desktop.id)
        container.exec_run(["pkill", "-f", "mousepad --disable-server"], user="1000:1000")
        hidden.communicate(timeout=30)
    await clear(desktop)  # gone: the screen is shown again


async def test_a_pop_up_naming_no_process_masks_the_screen(desktop: KioskChannel) -> None:
    await clear(desktop)
    bare = run_in(desktop, ["python3", "-c", BARE_POPUP])
    try:
        assert bare.stdout is not None
        assert bare.stdout.readline() == b"mapped\n"
        error = (await probe(desktop))["error"]
        assert error and "names no process" in error, error
    finally:
        bare.communicate(timeout=30)  # its stdin closed: it ends
    await clear(desktop)


async def test_a_registered_apps_own_menu_is_shown(desktop: KioskChannel) -> None:
    await clear(desktop)

    async def file_menu() -> tuple[int, int] | None:
        where = await desktop.request("locate", 10, app="mousepad", role="menu", name="File")
        return tuple(where["center"]) if where.get("center") else None  # type: ignore[return-value]

    x, y = await wait_until(file_menu, limit=30)
    await desktop.request("click", 10, x=x, y=y, button="left", double=False)

    async def quit_shown() -> tuple[int, int] | None:
        where = await desktop.request("locate", 10, app="mousepad", role="menu item", name="Quit")
        return tuple(where["center"]) if where.get("center") else None  # type: ignore[return-value]

    qx, qy = await wait_until(quit_shown, limit=30)

    async def on_top() -> bool:  # X's topmost window there is the menu's pop-up
        return bool((await desktop.request("target", 3, x=qx, y=qy))["role"] == "menu item")

    await wait_until(on_top, limit=30)
    assert (await probe(desktop))["error"] is None  # Mousepad's pop-up: its pid is on the bus
    await desktop.request("key", 10, key="Escape")
