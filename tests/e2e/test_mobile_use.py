"""SPEC S4.1/S4.4 end to end for the phone rigs: a real MCP client -> corral mcp ->
signed loopback -> corral gateway -> corral's own adb server -> the fake adbd (ADB wire
protocol), and -> the fake WebDriverAgent (HTTP) and the fake `xcrun` on PATH. Effects
are read back from the simulators' state."""

from __future__ import annotations

import json
import os
import plistlib
import signal
import stat
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from sandboxes.fence import unfence
from tests.e2e.conftest import connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import image_of, text_of
from tests.helpers import children_of
from tests.images import ENV
from tests.recorded import recorded, reddish
from tests.simulators import fake_wda
from tests.simulators.fake_adbd import FakeAdbd
from tests.simulators.fake_android import INJECTION, PASSWORD_BOX, PASSWORD_RGB, make_apk
from tests.simulators.fake_wda import SCALE, SECURE, FakeWda

pytestmark = [pytest.mark.anyio, pytest.mark.mobile]

UDID = "0A1B2C3D-0000-4000-8000-00000000ABCD"
FAKE_BIN = Path(__file__).resolve().parents[1] / "simulators" / "bin"


def write_agent(home: CorralHome, name: str, *, read_only: bool = False) -> None:
    text = render_new_agent(name)
    text = text.replace("mobile_use = false", "mobile_use = true")
    text = text.replace("ios_use = false", "ios_use = true")
    if read_only:
        text = text.replace("read_only = false", "read_only = true")
    path = home.agent_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class World:
    adbd: FakeAdbd  # the device the first lease takes
    spare: FakeAdbd  # the second configured device
    wda: FakeWda
    root: Path
    home: CorralHome | None = None
    gateway_pid: int = 0

    @property
    def serial(self) -> str:
        return f"127.0.0.1:{self.adbd.port}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("mobile")
    apks, apps = root / "apks", root / "apps"
    apks.mkdir()
    apps.mkdir()
    (apks / "shop.apk").write_bytes(make_apk("com.example.shop"))
    (apps / "Shop.app").mkdir()
    (apps / "Shop.app" / "Info.plist").write_bytes(
        plistlib.dumps({"CFBundleIdentifier": "com.example.Shop"})
    )
    wda = fake_wda.serve(FakeWda())
    with pytest.MonkeyPatch.context() as env, FakeAdbd() as adbd, FakeAdbd() as spare:
        env.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
        env.setenv("FAKE_SIMCTL_STATE", str(root / "simctl.json"))
        env.setenv("FAKE_SIMCTL_UDID", UDID)
        try:
            yield World(adbd, spare, wda, root)
        finally:
            fake_wda.stop(wda)


@pytest.fixture(scope="module")
async def gateway(world: World) -> AsyncIterator[CorralHome]:
    """One gateway for the module; when it stops, its adb server must be gone too."""
    home = CorralHome(root=world.root / "corral-home", env=ENV)
    home.ensure()
    write_agent(home, "alice")
    write_agent(home, "reader", read_only=True)
    config = (
        f'[rigs.android]\ndevices = ["{world.serial}", "127.0.0.1:{world.spare.port}"]\n'
        f'apk_dir = "{world.root / "apks"}"\ntimeout_seconds = 5\n\n'
        f'[rigs.ios]\nwda_url = "{world.wda.url}"\nsimulator_udid = "{UDID}"\n'
        f'app_dir = "{world.root / "apps"}"\ntimeout_seconds = 5\n'
    )
    async with running_gateway(home, config, recording=True) as (_, pid):
        world.home, world.gateway_pid = home, pid
        yield home
        servers = adb_servers_of(pid)
    assert len(servers) == 1, "the gateway ran one adb server"
    assert not Path(f"/proc/{servers[0]}").exists(), "its adb server outlived the gateway"


def adb_servers_of(pid: int) -> list[int]:
    """Child processes of `pid` that are an adb server."""
    return [
        child for child, argv in children_of(pid) if argv[0].endswith(b"/adb") and b"server" in argv
    ]


async def call(mcp: Any, tool: str, verb: str, **arguments: Any) -> types.CallToolResult:
    result: types.CallToolResult = await mcp.client.call_tool(tool, {"verb": verb, **arguments})
    return result


def fenced(result: types.CallToolResult) -> str:
    text = text_of(result)
    start = text.index("The text between the two UNTRUSTED-DATA markers")
    return unfence(text[start:])[1]


async def test_mobile_use_drives_the_fake_android_device_through_mcp(
    gateway: CorralHome, world: World
) -> None:
    adbd, serial = world.adbd, world.serial
    async with connect(gateway, "stdio") as mcp:
        assert {"mobile_use", "ios_use", "rig_list", "rig_close"} <= await mcp.tool_names()
        listed = await call(mcp, "mobile_use", "devices")
        assert f"{serial}: device, free" in text_of(listed), text_of(listed)

        tree = await call(mcp, "mobile_use", "inspect")
        assert not tree.is_error, text_of(tree)
        inside = fenced(tree)
        assert INJECTION in inside and INJECTION not in text_of(tree).split("<<<")[0]
        assert "[secret field: value withheld]" in inside and "••••" not in text_of(tree)

        assert not (await call(mcp, "mobile_use", "tap", ref="e3")).is_error
        assert not (await call(mcp, "mobile_use", "text", text="ann")).is_error
        assert adbd.device.events[-2:] == ["input tap 270 320", "input text ann"]

        shot = await call(mcp, "mobile_use", "screenshot")
        image = image_of(shot)  # exactly one image
        x1, y1, x2, y2 = PASSWORD_BOX
        assert image.getpixel(((x1 + x2) // 2, (y1 + y2) // 2)) == (0, 0, 0)
        assert image.getpixel((x1 - 20, y1 - 20)) != PASSWORD_RGB
        assert "1 password field(s) masked" in text_of(shot)

        installed = await call(mcp, "mobile_use", "install", file="shop.apk")
        assert "Installed shop.apk" in text_of(installed), text_of(installed)
        assert "com.example.shop" in adbd.device.packages
        outside = await call(mcp, "mobile_use", "install", file="..apk")
        assert outside.is_error
        ran = await call(mcp, "mobile_use", "command", argv=["pm", "list", "packages"])
        assert "package:com.example.shop" in fenced(ran)
        before = list(adbd.device.commands)
        for argv in (["pm", "install", "/sdcard/x.apk"], ["dumpsys", "notification", "--noredact"]):
            refused = await call(mcp, "mobile_use", "command", argv=argv)
            assert refused.is_error and "argv: " in text_of(refused), text_of(refused)
        assert adbd.device.commands == before  # the device was asked nothing

        rigs = (await mcp.client.call_tool("rig_list", {})).structured_content
        assert rigs is not None
        assert [(r["surface"], r["device"]) for r in rigs["rigs"]] == [("android", serial)]
        assert "held by you" in text_of(await call(mcp, "mobile_use", "devices"))

        closed = await mcp.client.call_tool("rig_close", {})
        assert not closed.is_error
        # The rig was recorded (issue 24), its password field masked in every frame.
        meta, shots = recorded(gateway, rigs["rigs"][0]["rig_id"])
        assert meta.surface == "android" and shots, meta
        x1, y1, x2, y2 = PASSWORD_BOX
        assert not [img for img in shots if reddish(img, ((x1 + x2) // 2, (y1 + y2) // 2))]
        assert f"{serial}: device, free" in text_of(await call(mcp, "mobile_use", "devices"))
    # corral's adb server is the gateway's child, on a unix socket in a private directory
    servers = adb_servers_of(world.gateway_pid)
    assert len(servers) == 1
    cmdline = Path(f"/proc/{servers[0]}/cmdline").read_bytes().split(b"\0")
    assert cmdline[1] == b"-L" and cmdline[2].startswith(b"localfilesystem:")
    socket_dir = Path(os.fsdecode(cmdline[2].split(b":", 1)[1])).parent
    assert stat.S_IMODE(socket_dir.stat().st_mode) == 0o700


async def test_a_device_lost_mid_call_answers_clearly_and_frees_the_lease(
    gateway: CorralHome, world: World
) -> None:
    """Runs after the test above (it takes the first device away for good)."""
    async with connect(gateway, "stdio") as mcp:
        assert not (await call(mcp, "mobile_use", "inspect")).is_error
        world.adbd.drop_on = "screencap"
        lost = await call(mcp, "mobile_use", "screenshot")
        assert lost.is_error
        assert f"device {world.serial}" in text_of(lost)
        assert "Your rig" in text_of(lost) and "ended" in text_of(lost)
        rigs = (await mcp.client.call_tool("rig_list", {})).structured_content
        assert rigs is not None and rigs["rigs"] == []
        listed = text_of(await call(mcp, "mobile_use", "devices"))
        assert f"{world.serial}: " in listed and f"{world.serial}: device" not in listed
        again = await call(mcp, "mobile_use", "inspect")  # a new rig, on the other device
        assert not again.is_error, text_of(again)
        rigs = (await mcp.client.call_tool("rig_list", {})).structured_content
        assert rigs is not None
        assert [r["device"] for r in rigs["rigs"]] == [f"127.0.0.1:{world.spare.port}"]
        assert not (await mcp.client.call_tool("rig_close", {})).is_error


async def test_ios_use_drives_the_fake_wda_and_xcrun_through_mcp(
    gateway: CorralHome, world: World
) -> None:
    wda, tmp_path = world.wda, world.root
    async with connect(gateway, "stdio") as mcp:
        tree = await call(mcp, "ios_use", "inspect")
        assert not tree.is_error, text_of(tree)
        assert "SecureTextField" in fenced(tree)
        assert not (await call(mcp, "ios_use", "tap", ref="e5")).is_error
        assert wda.taps == [(100.0, 300.0)]
        image = image_of(await call(mcp, "ios_use", "screenshot"))
        x, y, w, h = (v * SCALE for v in SECURE)
        assert image.getpixel((x + w // 2, y + h // 2)) == (0, 0, 0)
        installed = await call(mcp, "ios_use", "install", file="Shop.app")
        assert "Installed Shop.app" in text_of(installed), text_of(installed)
        state = json.loads((tmp_path / "simctl.json").read_text())
        assert state["apps"] == {"com.example.Shop": {"path": str(tmp_path / "apps" / "Shop.app")}}
        refused = await call(mcp, "ios_use", "simctl", argv=["erase", "all"])
        assert refused.is_error and "not allowed" in text_of(refused)

        wda.fail_with = (500, "unknown error", "The simulator is locked")
        failed = await call(mcp, "ios_use", "press_button", button="home")
        assert failed.is_error and "The simulator is locked" in text_of(failed)
        wda.fail_with = None
        listed = (await mcp.client.call_tool("rig_list", {})).structured_content or {}
        assert not (await mcp.client.call_tool("rig_close", {})).is_error
    assert wda.sessions == set()  # the WDA session was deleted with the rig
    # The rig was recorded (issue 24), its secure field masked in every frame.
    meta, shots = recorded(gateway, listed["rigs"][0]["rig_id"])
    assert meta.surface == "ios" and shots, meta
    assert not [img for img in shots if reddish(img, (x + w // 2, y + h // 2))]


async def test_read_only_mode_hides_and_refuses_the_phone_rigs(gateway: CorralHome) -> None:
    async with connect(gateway, "stdio", agent="reader") as mcp:
        names = await mcp.tool_names()
        assert "mobile_use" not in names and "ios_use" not in names
        with pytest.raises(MCPError, match="refused in read-only mode") as caught:
            await call(mcp, "mobile_use", "inspect")
        assert "packageInstall" in str(caught.value)


def gone(pid: int) -> bool:
    """The process has ended (a zombie awaiting its new parent's wait counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


async def test_a_gateway_killed_with_sigkill_takes_its_adb_server_along(
    corral_home: CorralHome,
) -> None:
    write_agent(corral_home, "alice")
    with FakeAdbd() as adbd:
        config = f'[rigs.android]\ndevices = ["127.0.0.1:{adbd.port}"]\n'
        async with running_gateway(corral_home, config) as (_, pid):
            async with connect(corral_home, "stdio") as mcp:
                assert not (await call(mcp, "mobile_use", "devices")).is_error
            [server] = adb_servers_of(pid)
            os.kill(pid, signal.SIGKILL)

            async def ended() -> bool:
                return gone(server)

            await wait_until(ended, limit=10)
