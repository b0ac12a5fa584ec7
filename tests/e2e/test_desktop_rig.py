"""SPEC S4 end to end for the desktop rig (`computer_use`): a real MCP client -> corral mcp
-> signed loopback -> corral gateway -> the desktop rig container (Xvfb, openbox, Mousepad).
Effects are read back through the tools (the clipboard, window titles), polled."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import docker
import mcp_types as types
import pytest
from PIL import Image

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from sandboxes.fence import unfence
from tests.e2e.conftest import AGENT, connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import (
    SITE,
    image_of,
    kiosk_config,
    sites,  # noqa: F401 (the module-scoped site containers, shared by name)
    text_of,
)
from tests.recorded import recorded

RED, WHITE, BLACK = (255, 0, 0), (255, 255, 255), (0, 0, 0)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
async def gateway(corral_home: CorralHome) -> AsyncIterator[CorralHome]:
    path = corral_home.agent_file("alice")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_new_agent("alice").replace("desktop_use = false", "desktop_use = true"))
    async with running_gateway(corral_home) as (_, pid):
        GATEWAY_PIDS.add(str(pid))
        yield corral_home


async def use(mcp: Any, verb: str, **arguments: Any) -> types.CallToolResult:
    result: types.CallToolResult = await mcp.client.call_tool(
        "computer_use", {"verb": verb, **arguments}
    )
    assert not result.is_error, (verb, text_of(result))
    return result


def fenced(result: types.CallToolResult) -> str:
    text = text_of(result)
    return unfence(text[text.index("The text between the two UNTRUSTED-DATA markers") :])[1]


GATEWAY_PIDS: set[str] = set()


def desktops(client: docker.DockerClient) -> list[Any]:
    """The desktop rigs of this test's gateways (another checkout's tests on the same
    engine may run an agent of the same name)."""
    found = client.containers.list(
        all=True,
        ignore_removed=True,
        filters={"label": ["corral.kind=rig-desktop", f"corral.agent={AGENT}"]},
    )
    return [c for c in found if c.labels.get("corral.owner.pid") in GATEWAY_PIDS]


async def test_every_desktop_verb_through_mcp(
    gateway: CorralHome, docker_client: docker.DockerClient
) -> None:
    async with connect(gateway, "stdio") as mcp:
        assert {"computer_use", "rig_list", "rig_close"} <= await mcp.tool_names()
        shot = await use(mcp, "screenshot")
        assert image_of(shot).size == (1280, 800)
        assert (shot.structured_content or {}).get("masked") is False, text_of(shot)
        (container,) = desktops(docker_client)
        assert container.attrs["HostConfig"]["NetworkMode"] == "none"

        # Mousepad starts with the desktop and may take a while to map its window: poll
        # about once a second (each try is an action of the budget).
        resized: types.CallToolResult | None = None
        with anyio.fail_after(45):
            while resized is None:
                result: types.CallToolResult = await mcp.client.call_tool(
                    "computer_use",
                    {"verb": "resize", "window": "Mousepad", "width": 900, "height": 600},
                )
                if result.is_error:
                    assert "no window" in text_of(result), text_of(result)
                    await anyio.sleep(1)
                else:
                    resized = result
        assert "Mousepad" in fenced(resized)
        await use(mcp, "move", x=400, y=300)
        await use(mcp, "click", x=400, y=300)
        await use(mcp, "type", text="hello rig")
        await use(mcp, "scroll", x=400, y=300, direction="down", amount=2)
        await use(mcp, "drag", x=500, y=400, to_x=520, to_y=420)  # inside the text area

        async def clipboard_is(expected: str) -> bool:
            return fenced(await use(mcp, "clipboard_get")) == expected  # a free read

        async def copy_all(*expected: str) -> None:
            """Select all and copy until the clipboard holds one of `expected` (each round
            waits up to 3 s: GTK answers the key and the clipboard request asynchronously)."""
            seen = None
            for _ in range(5):
                await use(mcp, "key", key="ctrl+a")
                await use(mcp, "key", key="ctrl+c")
                with anyio.move_on_after(3):
                    while (seen := fenced(await use(mcp, "clipboard_get"))) not in expected:
                        await anyio.sleep(0.05)
                    return
            raise AssertionError(f"the document copied as {seen!r}, not any of {expected!r}")

        await copy_all("hello rig")

        async def paste_over_all() -> None:
            await use(mcp, "clipboard_set", text="pasted")
            await wait_until(lambda: clipboard_is("pasted"), limit=20)
            await use(mcp, "key", key="ctrl+a")
            await use(mcp, "key", key="ctrl+v")  # replaces the document with the clipboard

        await paste_over_all()
        # The paste lands when Mousepad has fetched the clipboard (asynchronously): before
        # End, it replaced the selection ("pasted!"); later, End had already cleared the
        # selection and it went in at the cursor, before or after the "!" (a loaded machine
        # once failed the test that expected only the first). Later still, it lands after
        # copy_all's own ctrl+a and replaces the whole "hello rig!": "pasted" (seen under
        # load). Had the paste failed, the document would copy as "hello rig!" (ctrl+c
        # overwrites the clipboard's "pasted"; it copied "hello rig" above).
        await use(mcp, "key", key="End")
        await use(mcp, "type", text="!")
        landed = ("pasted!", "hello rigpasted!", "hello rig!pasted", "pasted")
        try:
            await copy_all(*landed)
        except AssertionError:
            # Once in a CI run (of ~2000 tests, none failing around it) that ctrl+v did
            # nothing: the clipboard read back "pasted" through xclip just before, and
            # the document stayed "hello rig!". Mousepad's paste leaves quietly when
            # GTK's fetch of the clipboard's text comes back empty (its source:
            # mousepad_view_clipboard_paste returns on a NULL text), and that fetch is a
            # conversation between two X clients the rig does not take part in. A
            # person would paste again; so does the test, once, and then it must land.
            await paste_over_all()
            await copy_all("pasted")

        rows = ((await mcp.client.call_tool("rig_list", {})).structured_content or {})["rigs"]
        assert [(r["surface"], r["state"], r["screen"], r["controller"]) for r in rows] == [
            ("desktop", "ready", "1280x800", "ai")
        ]
        await mcp.client.call_tool("rig_close", {})
    assert desktops(docker_client) == []


async def test_every_invalid_desktop_verb_and_argument_is_named(gateway: CorralHome) -> None:
    async with connect(gateway, "stdio") as mcp:
        cases = [
            ({"verb": "navigate"}, "verb: computer_use has no verb 'navigate'"),
            ({"verb": "move", "x": 1920, "y": 0}, "x: must be from 0 to 1919 (got 1920)"),
            ({"verb": "drag", "x": 1, "y": 1, "to_x": 2}, "to_y: required (verb drag)"),
            ({"verb": "key", "key": "alt+F4"}, "key: key 'alt+F4' is not allowed"),
            ({"verb": "resize", "window": "x", "width": 50, "height": 100}, "width: must be"),
        ]
        for args, expected in cases:
            result = await mcp.client.call_tool("computer_use", args)
            assert result.is_error and expected in text_of(result), (args, text_of(result))


def beside_red(img: Image.Image, colour: tuple[int, int, int]) -> int:
    """Pixels of `colour` that have the page's red 1-3 px to their left: the left edge of
    the login page's white password field, if it is shown at all."""
    rgb = img.convert("RGB")
    width, height = rgb.size
    count = 0
    for y in range(0, height, 2):
        for x in range(3, width):
            if rgb.getpixel((x, y)) == colour and RED in (
                rgb.getpixel((x - d, y)) for d in (1, 2, 3)
            ):
                count += 1
    return count


def masked_point(img: Image.Image) -> tuple[int, int]:
    """A point 10 px inside the mask's left edge (black with the page's red left of it)."""
    rgb = img.convert("RGB")
    for y in range(0, rgb.height, 2):
        for x in range(3, rgb.width - 10):
            if rgb.getpixel((x, y)) == BLACK and rgb.getpixel((x - 1, y)) == RED:
                return x + 10, y
    raise AssertionError("no mask beside the red page")


def near(pixel: tuple[int, int, int], colour: tuple[int, int, int]) -> bool:
    """Within the codec's error of `colour`."""
    return all(abs(a - b) < 40 for a, b in zip(pixel, colour, strict=True))


async def test_a_password_field_in_the_desktops_chromium_is_masked(
    corral_home: CorralHome,
    sites: tuple[str, str, str],  # noqa: F811
    docker_client: docker.DockerClient,
) -> None:
    """Chromium on the desktop (started by codrive, which opens the page over CDP) shows
    the test site's login page: red, with a white password field holding a password. The
    desktop's screenshot blacks the field out (found through AT-SPI) and says so."""
    allow_chromium_on_the_desktop(corral_home)
    async with (
        running_gateway(corral_home, kiosk_config(sites), recording=True),
        connect(corral_home, "stdio") as mcp,
    ):
        await open_in_chromium(mcp, f"https://{SITE}/login")

        async def page_shown() -> Image.Image | None:
            """The screen once the page (red) shows its field: masked or not."""
            img = image_of(await use(mcp, "screenshot"))
            return img if beside_red(img, BLACK) + beside_red(img, WHITE) > 10 else None

        img = await wait_until(page_shown, limit=30)
        assert beside_red(img, WHITE) == 0  # no bit of the white field next to the page
        assert beside_red(img, BLACK) > 10  # the mask is where the field is
        shot = await use(mcp, "screenshot")
        assert "password field" in text_of(shot), text_of(shot)
        listed = (await mcp.client.call_tool("rig_list", {})).structured_content or {}
        await mcp.client.call_tool("rig_close", {})
    assert desktops(docker_client) == []
    # The desktop was recorded (issue 24): its frames are its masked screenshots, so the
    # last frame shows the page with its field masked, as the last screenshot did.
    meta, shots = recorded(corral_home, listed["rigs"][0]["rig_id"])
    assert meta.surface == "desktop" and meta.ended_by == "closed by the agent" and shots
    last = shots[-1]
    assert near(last.getpixel(masked_point(image_of(shot))), BLACK)


async def test_a_password_field_past_the_masks_reach_masks_the_whole_desktop(
    corral_home: CorralHome,
    sites: tuple[str, str, str],  # noqa: F811
) -> None:
    """A page whose password field is the last of 6001 on-screen elements in one
    container: more than the mask's walk reads (5000 elements of an application). The
    field must not be shown: the whole screen is masked, and the answer says the detection
    failed. (Before, the walk read a container's first 500 children as if they were all,
    and the field was shown.)"""
    allow_chromium_on_the_desktop(corral_home)
    async with (
        running_gateway(corral_home, kiosk_config(sites)),
        connect(corral_home, "stdio") as mcp,
    ):
        await open_in_chromium(mcp, f"https://{SITE}/crowded")

        async def masked_whole() -> types.CallToolResult | None:
            """A screenshot once the page's 6001 elements reached the accessibility tree
            (before, the tree can lag the page's paint: a limit of AT-SPI masking, the
            same for every page, docs/rigs.md)."""
            shot = await use(mcp, "screenshot")
            return shot if "detection failed" in text_of(shot) else None

        shot = await wait_until(masked_whole, limit=60)
        assert image_of(shot).getextrema() == ((0, 0), (0, 0), (0, 0)), text_of(shot)
        assert (shot.structured_content or {}).get("masked") is True, text_of(shot)


def allow_chromium_on_the_desktop(home: CorralHome) -> None:
    """alice: the desktop rig and codrive, allowed the test site."""
    path = home.agent_file("alice")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = render_new_agent("alice").replace("desktop_use = false", "desktop_use = true")
    text = text.replace("codrive = false", "codrive = true")
    text = text.replace("allowed_domains = []", f'allowed_domains = ["{SITE}"]')
    path.write_text(text)


async def open_in_chromium(mcp: Any, url: str) -> None:
    """Chromium on the desktop, started by codrive, opens `url` over CDP."""
    opened = await mcp.client.call_tool(
        "codrive_run",
        {
            "target_app": "chromium",
            "steps": [{"action": "click", "api_action": "open_url", "params": {"url": url}}],
            "watch_mode": True,
        },
    )
    run = opened.structured_content or {}
    assert run.get("state") == "finished", text_of(opened)
    assert run["steps"][0]["rung"] == "api_action", text_of(opened)
