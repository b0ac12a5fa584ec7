"""Issue 22 item 2 on the desktop rig and the phones: every input that can activate
something is judged by the approval rules (`confirm_words`), through the one pipeline.

- Desktop rig (real container, its Chromium on the test site's /deleteform): a click on
  the "Delete everything" button, a newline typed in the form's field, and Tab then
  Return onto the button each wait for an operator; judged by the test site's own
  request log: no /deleted request while the approval is pending or after a denial, one
  after an approval.
- Android (the fake adbd, a protocol-level simulator of a device: tests/simulators) and
  iOS (the fake WebDriverAgent, HTTP): a tap on "Delete data", Android's ENTER on the
  focused button, and an iOS newline are held; judged by the simulators' own input logs
  (the fake device's `input` events, the fake WDA's taps and keys).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import docker
import mcp_types as types
import pytest
from PIL import Image

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.held import while_held
from tests.e2e.test_computer_use import SITE, image_of, kiosk_config, text_of
from tests.e2e.test_computer_use import sites as sites
from tests.e2e.test_desktop_rig import GATEWAY_PIDS, desktops
from tests.e2e.test_operators import corral, pending
from tests.images import ENV
from tests.simulators import fake_wda
from tests.simulators.fake_adbd import FakeAdbd
from tests.simulators.fake_android import DELETE_BOX, DeviceState
from tests.simulators.fake_wda import DELETE, FakeWda
from tests.sites import requests_seen

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TIMEOUT = 20  # [approvals] timeout_seconds: a test decides every approval well before


def agent_toml(name: str, **flags: bool) -> str:
    text = render_new_agent(name)
    for flag, on in flags.items():
        text = text.replace(f"{flag} = false", f"{flag} = {str(on).lower()}")
    text = text.replace("allowed_domains = []", f'allowed_domains = ["{SITE}"]')
    return text.replace(
        "[capabilities.computer_use_config]\n",
        '[capabilities.computer_use_config]\nconfirm_words = ["delete"]\n',
        1,
    )


def write(home: CorralHome, name: str, **flags: bool) -> None:
    path = home.agent_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = agent_toml(name, **flags)
    lines, seen = [], set()
    for line in text.splitlines():  # keep the first confirm_words (ours)
        key = line.split("=")[0].strip()
        if key == "confirm_words" and key in seen:
            continue
        seen.add(key)
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")


async def held(
    home: CorralHome,
    act: Callable[[], Any],
    decide: str,
    on_pending: Callable[[], None],
    shows: str,
    rule: str = "confirm_words: delete",
) -> types.CallToolResult:
    """Run `act` (an MCP call); once its approval is pending (`rule`, the description
    naming `shows`), call `on_pending`, then `corral approvals DECIDE` it; the call's
    result."""

    async def during(approval: dict[str, Any]) -> None:
        assert approval["rule"] == rule, approval
        assert shows in approval["description"], approval
        on_pending()
        done = corral(home, "approvals", decide, approval["id"])
        assert done.returncode == 0, done.stderr

    result: types.CallToolResult = await while_held(home, act, during, limit=TIMEOUT)
    if decide == "deny":
        assert result.is_error and "denied this action" in text_of(result), text_of(result)
    else:
        assert not result.is_error, text_of(result)
    return result


# ------------------------------------------------------------------ the desktop rig


async def use(mcp: Any, verb: str, **arguments: Any) -> types.CallToolResult:
    result: types.CallToolResult = await mcp.client.call_tool(
        "computer_use", {"verb": verb, **arguments}
    )
    return result


def centre_of(img: Image.Image, colour: tuple[int, int, int]) -> tuple[int, int] | None:
    """The centre of the pixels of exactly `colour` (a sparse grid), if there are many."""
    rgb = img.convert("RGB")
    points = [
        (x, y)
        for y in range(0, rgb.height, 4)
        for x in range(0, rgb.width, 4)
        if rgb.getpixel((x, y)) == colour
    ]
    if len(points) < 50:
        return None
    xs, ys = sorted(p[0] for p in points), sorted(p[1] for p in points)
    return xs[len(xs) // 2], ys[len(ys) // 2]


async def test_a_click_a_typed_newline_and_return_onto_delete_wait_on_the_desktop(
    corral_home: CorralHome,
    sites: tuple[str, str, str],
    docker_client: docker.DockerClient,
) -> None:
    home, site_ip = corral_home, sites[1]
    write(home, "alice", desktop_use=True, codrive=True)

    def deleted() -> int:
        return sum(p.startswith("/deleted") for p in requests_seen(docker_client, site_ip))

    def nothing_yet() -> None:
        assert deleted() == 0, "the form reached the site before an approval"

    async with (
        running_gateway(home, kiosk_config(sites, TIMEOUT)) as (_, pid),
        connect(home, "stdio") as mcp,
    ):
        GATEWAY_PIDS.add(str(pid))

        async def open_page(path: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
            """codrive's open_url (an API action: no click), then the button's and the
            field's centres on the screen once the page shows."""
            step = {"action": "click", "api_action": "open_url", "params": {}}
            step["params"] = {"url": f"https://{SITE}{path}"}
            run = await mcp.client.call_tool(
                "codrive_run", {"target_app": "chromium", "steps": [step], "watch_mode": True}
            )
            assert (run.structured_content or {}).get("state") == "finished", text_of(run)

            async def shown() -> tuple[tuple[int, int], tuple[int, int]] | None:
                img = image_of(await use(mcp, "screenshot"))
                red, blue = centre_of(img, (255, 0, 0)), centre_of(img, (0, 0, 255))
                return (red, blue) if red and blue else None

            return await wait_until(shown, limit=30) if path == "/deleteform" else None

        async def fence(tag: str) -> None:
            """A later request of the desktop's Chromium: what came before it has arrived."""
            await open_page(f"/?after-{tag}")

            async def arrived() -> bool:
                return any(f"after-{tag}" in p for p in requests_seen(docker_client, site_ip))

            await wait_until(arrived, limit=20)

        # (a) A click on the button: denied, then nothing; approved, then the form is sent.
        button, field = await open_page("/deleteform")  # type: ignore[misc]
        await held(
            home,
            lambda: use(mcp, "click", x=button[0], y=button[1]),
            "deny",
            nothing_yet,
            "Delete everything",
        )
        await fence("click-deny")
        assert deleted() == 0

        # (b) "12\n" typed in the field (not covered: a click on it is not held): its
        # form's submit button is "Delete everything", so the newline waits.
        button, field = await open_page("/deleteform")  # type: ignore[misc]
        clicked = await use(mcp, "click", x=field[0], y=field[1])
        assert not clicked.is_error, text_of(clicked)
        await held(
            home, lambda: use(mcp, "type", text="12\n"), "deny", nothing_yet, "Delete everything"
        )
        await fence("newline-deny")
        assert deleted() == 0

        # (c) Tab from the field onto the button, then Return: held; approved, it is sent.
        button, field = await open_page("/deleteform")  # type: ignore[misc]
        assert not (await use(mcp, "click", x=field[0], y=field[1])).is_error
        assert not (await use(mcp, "key", key="Tab")).is_error
        await held(
            home, lambda: use(mcp, "key", key="Return"), "approve", nothing_yet, "Delete everything"
        )

        async def sent() -> bool:
            return deleted() == 1

        await wait_until(sent, limit=20)
        await mcp.client.call_tool("rig_close", {})
    assert desktops(docker_client) == []


async def test_a_newline_in_a_field_whose_button_lies_past_600_paragraphs_waits(
    corral_home: CorralHome,
    sites: tuple[str, str, str],
    docker_client: docker.DockerClient,
) -> None:
    """The form's "Delete everything" button comes after 600 paragraphs: the desktop's
    target read must still find it as the field's submit control (it read an element's
    first 500 children and judged the form itself, so the newline went through)."""
    home, site_ip = corral_home, sites[1]
    write(home, "alice", desktop_use=True, codrive=True)

    def deleted() -> int:
        return sum(p.startswith("/deleted") for p in requests_seen(docker_client, site_ip))

    before = deleted()  # the site is the module's: another test may have sent its form

    def nothing_yet() -> None:
        assert deleted() == before, "the form reached the site before an approval"

    async with (
        running_gateway(home, kiosk_config(sites, TIMEOUT)) as (_, pid),
        connect(home, "stdio") as mcp,
    ):
        GATEWAY_PIDS.add(str(pid))
        step = {"action": "click", "api_action": "open_url", "params": {}}
        step["params"] = {"url": f"https://{SITE}/deletelongform"}
        run = await mcp.client.call_tool(
            "codrive_run", {"target_app": "chromium", "steps": [step], "watch_mode": True}
        )
        assert (run.structured_content or {}).get("state") == "finished", text_of(run)

        async def field_shown() -> tuple[int, int] | None:
            return centre_of(image_of(await use(mcp, "screenshot")), (0, 0, 255))

        field = await wait_until(field_shown, limit=30)
        assert not (await use(mcp, "click", x=field[0], y=field[1])).is_error
        await held(
            home, lambda: use(mcp, "type", text="12\n"), "deny", nothing_yet, "Delete everything"
        )
        nothing_yet()
        await mcp.client.call_tool("rig_close", {})
    assert desktops(docker_client) == []


# ------------------------------------------------------------------ the phones


@pytest.fixture
def phones() -> Iterator[tuple[FakeAdbd, FakeWda]]:
    wda = fake_wda.serve(FakeWda(delete_button=True))
    try:
        with FakeAdbd(DeviceState(delete_button=True)) as adbd:
            yield adbd, wda
    finally:
        fake_wda.stop(wda)


@pytest.fixture
async def phone_gateway(
    tmp_path: Any, phones: tuple[FakeAdbd, FakeWda]
) -> AsyncIterator[CorralHome]:
    adbd, wda = phones
    home = CorralHome(root=tmp_path / "corral-home", env=ENV)
    home.ensure()
    write(home, "alice", mobile_use=True, ios_use=True)
    config = (
        f"[approvals]\ntimeout_seconds = {TIMEOUT}\n\n"
        f'[rigs.android]\ndevices = ["127.0.0.1:{adbd.port}"]\ntimeout_seconds = 5\n\n'
        f'[rigs.ios]\nwda_url = "{wda.url}"\ntimeout_seconds = 5\n'
    )
    async with running_gateway(home, config):
        yield home


async def test_taps_and_keys_onto_delete_wait_on_android_and_ios(
    phone_gateway: CorralHome, phones: tuple[FakeAdbd, FakeWda]
) -> None:
    """Against the protocol-level simulators: the fake adbd (tests/simulators/fake_adbd.py)
    and the fake WebDriverAgent (tests/simulators/fake_wda.py), no real device."""
    home, (adbd, wda) = phone_gateway, phones
    device = adbd.device
    x1, y1, x2, y2 = DELETE_BOX
    at = ((x1 + x2) // 2, (y1 + y2) // 2)

    def taps() -> list[str]:
        return [e for e in device.events if e.startswith("input tap")]

    def no_android_input() -> None:
        assert taps() == [] and not any("KEYCODE_ENTER" in e for e in device.events)

    async with connect(home, "stdio") as mcp:

        async def mobile(verb: str, **arguments: Any) -> types.CallToolResult:
            result: types.CallToolResult = await mcp.client.call_tool(
                "mobile_use", {"verb": verb, **arguments}
            )
            return result

        await held(
            home, lambda: mobile("tap", x=at[0], y=at[1]), "deny", no_android_input, "Delete data"
        )
        assert taps() == []
        await held(
            home,
            lambda: mobile("tap", x=at[0], y=at[1]),
            "approve",
            no_android_input,
            "Delete data",
        )
        assert taps() == [f"input tap {at[0]} {at[1]}"]
        signed = await mobile("tap", x=270, y=600)  # "Sign in": no rule covers it
        assert not signed.is_error, text_of(signed)
        assert pending(home) == []

        device.focus = "delete"  # ENTER on the focused "Delete data" button
        await held(home, lambda: mobile("key", key="ENTER"), "deny", lambda: None, "Delete data")
        assert not any("KEYCODE_ENTER" in e for e in device.events)
        device.focus = "user"  # ENTER in a text field: judged by the button after it,
        entered = await mobile("key", key="ENTER")  # "Sign in", which no rule covers
        assert not entered.is_error and pending(home) == [], text_of(entered)
        assert device.events[-1] == "input keyevent KEYCODE_ENTER"
        back = await mobile("key", key="BACK")  # not an activating key: never held
        assert not back.is_error, text_of(back)
        await mcp.client.call_tool("rig_close", {})

        async def ios(verb: str, **arguments: Any) -> types.CallToolResult:
            result: types.CallToolResult = await mcp.client.call_tool(
                "ios_use", {"verb": verb, **arguments}
            )
            return result

        x, y, w, h = DELETE

        def no_ios_input() -> None:
            assert wda.taps == [] and "\n" not in wda.typed

        await held(
            home,
            lambda: ios("tap", x=x + w // 2, y=y + h // 2),
            "deny",
            no_ios_input,
            "Delete data",
        )
        assert wda.taps == []
        # A newline (Return) typed on iOS: WDA does not say what has the focus, so it waits.
        await held(
            home,
            lambda: ios("text", text="ann\n"),
            "deny",
            no_ios_input,
            "unknown element",
            "confirm_words",
        )
        assert wda.typed == ""
        typed = await ios("text", text="ann")
        assert not typed.is_error and wda.typed == "ann"
        await mcp.client.call_tool("rig_close", {})
