"""mobile_use's ADB path against the fake adbd: corral's own adb server (Google's adb
from the adbutils wheel) attaches the fake with `adb connect`, and every call crosses
the real smart-socket protocol. `adb-shell` drives the same fake as a second,
independent client (no adb server), so the fake answers what real clients send."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import adbutils
import anyio
import pytest
from adb_shell.adb_device import AdbDeviceTcp
from PIL import Image

from orchestrator.audit import AuditLog
from orchestrator.config import ComputerUseConfig, CorralConfig, render_new_agent
from orchestrator.errors import DeviceError, SessionRefused
from orchestrator.home import CorralHome
from orchestrator.surfaces.android.adb import AdbServer, AndroidDevice
from orchestrator.surfaces.devices import MobileDevices
from orchestrator.surfaces.rigs import RigManager
from sandboxes.mobile_params import MobileUseParams
from sandboxes.withhold import WITHHELD
from tests.fakes import png_claiming
from tests.simulators.fake_adbd import FakeAdbd
from tests.simulators.fake_android import LAUNCHER, PASSWORD_BOX, PASSWORD_RGB, make_apk

pytestmark = [pytest.mark.anyio, pytest.mark.mobile]


def config_for(*serials: str, apk_dir: Path | None = None, timeout: int = 10) -> CorralConfig:
    android: dict[str, object] = {"devices": list(serials), "timeout_seconds": timeout}
    if apk_dir is not None:
        android["apk_dir"] = str(apk_dir)
    return CorralConfig.model_validate({"rigs": {"android": android}})


@pytest.fixture
def fake() -> Iterator[FakeAdbd]:
    with FakeAdbd() as device:
        yield device


@pytest.fixture
async def devices(fake: FakeAdbd, tmp_path: Path) -> AsyncIterator[MobileDevices]:
    (tmp_path / "apks").mkdir()
    pool = MobileDevices(config_for(f"127.0.0.1:{fake.port}", apk_dir=tmp_path / "apks"))
    try:
        yield pool
    finally:
        await pool.close()


def png_image(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def tcp_listeners_of(pid: int) -> list[str]:
    """The TCP sockets process `pid` listens on (the kernel's tables, by socket inode)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(fields[1])
    return found


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A CORRAL_HOME-like parent that every user may enter (0755), short enough for a
    unix socket path; the adb server's private directory goes inside it."""
    parent = Path(tempfile.mkdtemp(prefix="corral-t-"))
    parent.chmod(0o755)
    try:
        yield parent / "adb"
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def verb(**args: object) -> object:
    return MobileUseParams.parse_verbs(args).verb


async def test_corral_runs_its_own_adb_server_on_a_private_socket_and_stops_it(
    fake: FakeAdbd, short_dir: Path
) -> None:
    server = AdbServer(config_for(f"127.0.0.1:{fake.port}").rigs.android, home_dir=short_dir)
    try:
        states = await server.states()
        assert [(s.serial, s.state) for s in states] == [(f"127.0.0.1:{fake.port}", "device")]
        assert server.socket_path == short_dir / "adb.sock"
        assert stat.S_ISSOCK(server.socket_path.stat().st_mode)
        assert stat.S_IMODE(short_dir.stat().st_mode) == 0o700
        assert server.process is not None
        assert tcp_listeners_of(server.process.pid) == []  # no TCP port at all
        assert fake.connections == 1
    finally:
        await server.close()
    assert not (short_dir / "adb.sock").exists()


async def test_calls_close_their_connections_at_once_and_ask_the_version_once(
    devices: MobileDevices, fake: FakeAdbd
) -> None:
    """corral's connections to its adb server close without adbutils' 10 ms wait and
    leave no descriptor behind; the server's version is asked once, not per call."""
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    assert rig.dev is not None and devices.adb is not None and devices.adb.client is not None
    await rig.dev.shell(["input", "tap", "1", "1"])
    open_before = len(os.listdir("/proc/self/fd"))
    asked: list[int] = []
    client = devices.adb.client
    original = type(client).__mro__[1].server_version

    def counted(self: object) -> int:
        asked.append(1)
        return int(original(self))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(client).__mro__[1], "server_version", counted)
        for n in range(30):
            await rig.dev.shell(["input", "tap", str(n), str(n)])
    assert len(os.listdir("/proc/self/fd")) == open_before
    assert fake.device.commands[-1] == ["input", "tap", "29", "29"]
    assert asked == []  # asked once already, by the first call


async def test_argv_words_reach_the_device_as_words_never_as_shell_syntax(
    devices: MobileDevices, fake: FakeAdbd
) -> None:
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    word = "x; pm uninstall com.example.notes"
    # `command` refuses such a word (tests/unit/test_adb_commands.py); below it, every
    # call corral makes quotes each word all the same
    assert rig.dev is not None
    await rig.dev.shell(["getprop", word])
    assert fake.device.injected == []
    assert "com.example.notes" in fake.device.packages
    assert fake.device.commands[-1] == ["getprop", word]
    # the fake does run a second command when one is really there (the check can fail)
    assert devices.adb is not None and devices.adb.client is not None
    raw = devices.adb.client.device(rig.device)
    await anyio.to_thread.run_sync(lambda: raw.shell("getprop x; getprop y"))
    assert fake.device.injected == ["getprop y"]


async def test_every_android_verb_changes_the_fake_device(
    devices: MobileDevices, fake: FakeAdbd, tmp_path: Path
) -> None:
    (tmp_path / "apks" / "shop.apk").write_bytes(make_apk("com.example.shop"))
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    assert (rig.width, rig.height) == (540, 960)
    assert devices.leases == {rig.device: "alice"}

    inspected = await rig.run(verb(verb="inspect"), "")
    text = inspected.content[0].text
    assert "UNTRUSTED-DATA" in text and '"Sign in"' in text and WITHHELD in text
    await rig.run(verb(verb="tap", ref="e5"), "")
    await rig.run(verb(verb="swipe", x=1, y=2, to_x=3, to_y=4), "")
    await rig.run(verb(verb="text", text="ann lee"), "")
    await rig.run(verb(verb="key", key="BACK"), "")
    assert fake.device.events[-4:] == [
        "input tap 270 600",
        "input swipe 1 2 3 4 300",
        "input text ann%slee",
        "input keyevent KEYCODE_BACK",
    ]
    assert fake.device.typed == "ann lee"

    installed = await rig.run(verb(verb="install", file="shop.apk"), "")
    assert "Installed shop.apk" in installed.content[0].text
    assert "com.example.shop" in fake.device.packages
    assert "/data/local/tmp/corral-install.apk" not in fake.device.files  # removed again
    await rig.run(verb(verb="start", package="com.example.shop"), "")
    assert fake.device.foreground == "com.example.shop"
    await rig.run(verb(verb="stop", package="com.example.shop"), "")
    assert fake.device.foreground == LAUNCHER
    await rig.run(verb(verb="reset", package="com.example.shop"), "")
    assert "clear com.example.shop" in fake.device.events
    await rig.run(verb(verb="deep_link", url="shop://item/7?ref=a b".replace(" ", "")), "")
    assert fake.device.opened_urls == ["shop://item/7?ref=ab"]
    await rig.run(verb(verb="uninstall", package="com.example.shop"), "")
    assert "com.example.shop" not in fake.device.packages
    refused = await rig.run(verb(verb="uninstall", package="com.example.shop"), "")
    assert "The package manager refused" in refused.content[0].text


async def test_the_screenshot_masks_the_password_field_found_in_the_ui_tree(
    devices: MobileDevices,
) -> None:
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    shot = await rig.run(verb(verb="screenshot"), "")
    assert len(shot.images) == 1
    image = png_image(shot.images[0].png)
    x1, y1, x2, y2 = PASSWORD_BOX
    assert image.getpixel(((x1 + x2) // 2, (y1 + y2) // 2)) == (0, 0, 0)
    assert image.getpixel((5, 5)) == (255, 255, 255)
    assert image.getpixel((x1 + 10, y1 - 20)) != PASSWORD_RGB
    assert shot.structured["masked_fields"] == 1


@pytest.mark.parametrize("shape", ["crowd", "nesting"])
async def test_a_password_field_past_the_trees_cut_or_deep_in_it_is_masked(
    devices: MobileDevices, fake: FakeAdbd, shape: str
) -> None:
    """The device's tree is untrusted: 2010 rows before the password field (past the
    tree's cut of 2000 elements), or the screen nested 5000 layouts deep (deeper than
    Python's stack). The screenshot still blacks the field out and answers."""
    setattr(fake.device, shape, 2010 if shape == "crowd" else 5000)
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    shot = await rig.run(verb(verb="screenshot"), "")
    x1, y1, x2, y2 = PASSWORD_BOX
    image = png_image(shot.images[0].png)
    assert image.getpixel(((x1 + x2) // 2, (y1 + y2) // 2)) == (0, 0, 0)
    assert image.getpixel((5, 5)) == (255, 255, 255)  # the rest is shown
    assert shot.structured["masked_fields"] == 1


async def test_inspect_never_shows_a_password_the_device_tree_gives_away(
    devices: MobileDevices, fake: FakeAdbd
) -> None:
    """Against the fake adbd (a protocol-level simulator: real adb server, real smart
    sockets): a device whose uiautomator dump holds the password as the field's text, in
    a node inside the field and merged into the window's content-desc. inspect shows the
    field and where the value was, never the value; the screenshot still masks it."""
    fake.device.leaked_password = "droid-pw-3141"
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    inspected = await rig.run(verb(verb="inspect"), "")
    text = inspected.content[0].text
    assert "droid-pw-3141" not in text and "droid-pw-3141" not in repr(inspected.structured)
    assert f"- EditText {WITHHELD} id=password" in text
    assert f'"Sign in, {WITHHELD}"' in text  # the merged description, the value taken out
    shot = await rig.run(verb(verb="screenshot"), "")
    x1, y1, x2, y2 = PASSWORD_BOX
    assert png_image(shot.images[0].png).getpixel(((x1 + x2) // 2, (y1 + y2) // 2)) == (0, 0, 0)


async def test_install_takes_only_files_inside_the_configured_apk_dir(
    devices: MobileDevices, tmp_path: Path
) -> None:
    (tmp_path / "outside.apk").write_bytes(make_apk("com.evil.app"))
    (tmp_path / "apks" / "link.apk").symlink_to(tmp_path / "outside.apk")
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    with pytest.raises(DeviceError, match="resolves outside the configured apk_dir"):
        await rig.run(verb(verb="install", file="link.apk"), "")
    with pytest.raises(DeviceError, match=r"no missing\.apk in the configured apk_dir"):
        await rig.run(verb(verb="install", file="missing.apk"), "")


async def test_one_agent_holds_a_device_at_a_time(devices: MobileDevices) -> None:
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    with pytest.raises(SessionRefused, match="is held by another agent"):
        await devices.start_android("r2", "bob", ComputerUseConfig(), 0.0)
    listed = await devices.devices_answer("bob")
    assert listed.structured["devices"][0]["held_by"] == "another agent"
    devices.release(rig)
    again = await devices.start_android("r3", "bob", ComputerUseConfig(), 0.0)
    assert devices.leases == {again.device: "bob"}


async def test_a_device_that_vanishes_mid_call_ends_the_rig_with_a_clear_message(
    devices: MobileDevices, fake: FakeAdbd
) -> None:
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    fake.drop_on = "screencap"
    with pytest.raises(DeviceError) as caught:
        await rig.run(verb(verb="screenshot"), "")
    assert caught.value.lost
    assert rig.device in str(caught.value) and rig.broken is not None


async def test_a_device_that_claims_a_huge_screen_is_refused_and_leaves_no_lease(
    devices: MobileDevices, fake: FakeAdbd
) -> None:
    """Attack: `wm size` names a screen of 60000x60000. The gateway allocated for that size
    (the whole-screen mask when the tree could not be read); the rig is refused now."""
    fake.device.screen_size = (60000, 60000)
    with pytest.raises(DeviceError, match=r"screen cannot be used: .*60000x60000"):
        await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    assert devices.leases == {}


@pytest.mark.parametrize(
    ("screencap", "why"),
    [
        (png_claiming(60000, 60000), "60000x60000"),
        (b"\x89PNG garbled: the capture cut short", "cannot be used: not a PNG"),
    ],
    ids=["claims a huge screen", "not a PNG"],
)
async def test_a_screencap_that_claims_a_huge_screen_or_is_no_png_is_answered_black(
    devices: MobileDevices, fake: FakeAdbd, screencap: bytes, why: str
) -> None:
    """Attack: screencap sends a small PNG whose header claims 60000x60000 pixels (a
    decompression bomb's header), or bytes that are no PNG at all: the gateway never
    decodes them; the answer is black at the device's own size and says why, and the rig
    goes on."""
    rig = await devices.start_android("r1", "alice", ComputerUseConfig(), 0.0)
    fake.device.screencap = screencap
    shot = await rig.run(verb(verb="screenshot"), "")
    image = png_image(shot.images[0].png)
    assert image.size == (rig.width, rig.height)
    assert {c for _, c in image.getcolors() or []} == {(0, 0, 0)}
    assert why in shot.content[-1].text and rig.broken is None
    fake.device.screencap = None
    shown = await rig.run(verb(verb="screenshot"), "")
    assert png_image(shown.images[0].png).getpixel((5, 5)) == (255, 255, 255)


async def test_an_unauthorized_device_is_never_leased_and_says_what_to_do(
    tmp_path: Path,
) -> None:
    with FakeAdbd(auth_required=True) as locked:
        pool = MobileDevices(config_for(f"127.0.0.1:{locked.port}"))
        try:

            async def unauthorized() -> bool:
                states = await pool.devices_answer("alice")
                return bool(states.structured["devices"][0]["state"] == "unauthorized")

            with anyio.fail_after(15):
                while not await unauthorized():
                    await anyio.sleep(0.1)  # polling the adb server's view of the device
            with pytest.raises(SessionRefused, match=r"unauthorized.*accept the USB debugging"):
                await pool.start_android("r1", "alice", ComputerUseConfig(), 0.0)
            assert pool.leases == {}
            assert 2 in locked.auth_seen  # the adb server really tried its key
        finally:
            await pool.close()


def test_adb_shell_drives_the_fake_as_an_independent_client(fake: FakeAdbd) -> None:
    device = AdbDeviceTcp("127.0.0.1", fake.port, default_transport_timeout_s=5.0)
    assert device.connect(rsa_keys=None, auth_timeout_s=1.0)
    try:
        assert device.shell("getprop ro.product.model").strip() == "CorralFake"
        device.push(io.BytesIO(make_apk("com.example.other")), "/data/local/tmp/other.apk")
        assert "Success" in device.shell("pm install -r /data/local/tmp/other.apk")
        assert "com.example.other" in fake.device.packages
        png = device.exec_out("screencap -p", decode=False)
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
    finally:
        device.close()


async def test_with_its_adb_server_gone_a_call_fails_and_starts_no_other_server(
    fake: FakeAdbd,
) -> None:
    server = AdbServer(config_for(f"127.0.0.1:{fake.port}").rigs.android)
    try:
        await server.states()
        assert server.client is not None and server.process is not None
        device = AndroidDevice(server.client, f"127.0.0.1:{fake.port}", 5)
        server.process.kill()
        await anyio.to_thread.run_sync(server.process.wait)
        # adbutils' own client would run `adb start-server` (port 5037) here
        with pytest.raises(DeviceError, match="connect to corral's adb server failed") as caught:
            await device.shell(["getprop"])
        assert caught.value.lost
    finally:
        await server.close()


def test_adbutils_would_start_a_default_server_and_corral_s_client_does_not(
    tmp_path: Path,
) -> None:
    from orchestrator.surfaces.android.adb import PrivateAdbClient

    path = tmp_path / "adb.sock"  # nothing listens there
    with pytest.raises(adbutils.AdbError, match="connect to corral's adb server failed"):
        PrivateAdbClient(path, 2).list()
    assert not path.exists()


# ------------------------------------------------------------------ the rig manager's leases


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def manager_for(home: CorralHome, serial: str, clock: Clock, **cu: object) -> RigManager:
    text = render_new_agent("alice").replace("mobile_use = false", "mobile_use = true")
    extra = "".join(f"{k} = {v}\n" for k, v in cu.items())
    text = text.replace("max_actions = 50\n", "")
    text = text.replace(
        "[capabilities.computer_use_config]\n", f"[capabilities.computer_use_config]\n{extra}"
    )
    home.agent_file("alice").parent.mkdir(parents=True, exist_ok=True)
    home.agent_file("alice").write_text(text)
    config = config_for(serial)
    # config.toml says the same: the gate lists mobile_use only while a device is configured
    home.config_file.write_text(f'[rigs.android]\ndevices = ["{serial}"]\ntimeout_seconds = 10\n')
    # a phone rig needs no container backend and no egress
    return RigManager(home, config, None, AuditLog(home.audit_file), None, clock=clock)  # type: ignore[arg-type]


async def test_idle_timeout_ends_the_rig_and_releases_the_device(
    corral_home: CorralHome, fake: FakeAdbd
) -> None:
    clock = Clock()
    rigs = manager_for(
        corral_home, f"127.0.0.1:{fake.port}", clock, idle_timeout_seconds=5, max_actions=2
    )
    try:
        first = await rigs.handle("alice", "mobile_use", {"verb": "key", "key": "BACK"})
        assert not first.is_error, first
        assert rigs.mobile.leases == {f"127.0.0.1:{fake.port}": "alice"}
        await rigs.handle("alice", "mobile_use", {"verb": "key", "key": "BACK"})
        over = await rigs.handle("alice", "mobile_use", {"verb": "key", "key": "BACK"})
        assert over.is_error and "rig_close" in over.content[0].text  # the budget
        clock.now += 6
        assert await rigs.expire() == [("alice", "android", "")]
        assert rigs.mobile.leases == {}
        events = [e["event"] for e in AuditLog(corral_home.audit_file).read()]
        assert events.count("rig_started") == 1 and events.count("rig_ended") == 1
    finally:
        await rigs.close_all()


async def test_revoking_mobile_use_ends_the_rig_and_releases_the_device(
    corral_home: CorralHome, fake: FakeAdbd
) -> None:
    rigs = manager_for(corral_home, f"127.0.0.1:{fake.port}", Clock())
    try:
        assert not (await rigs.handle("alice", "mobile_use", {"verb": "inspect"})).is_error
        path = corral_home.agent_file("alice")
        path.write_text(path.read_text().replace("mobile_use = true", "mobile_use = false"))
        assert await rigs.expire() == [("alice", "android", "")]
        assert rigs.mobile.leases == {}
        refused = await rigs.handle("alice", "mobile_use", {"verb": "inspect"})
        assert refused.is_error and "mobile_use" in refused.content[0].text
    finally:
        await rigs.close_all()


BAD_DUMPS = {
    "not XML": "<hierarchy><node",
    "DTD or entities": '<!DOCTYPE x [<!ENTITY a "b">]><hierarchy/>',
    "box cannot be read": (
        '<hierarchy><node class="android.widget.EditText" password="true" '
        'bounds="[a,b][c,d]" /></hierarchy>'
    ),
}


@pytest.mark.parametrize("why", list(BAD_DUMPS))
async def test_an_unreadable_ui_dump_is_a_clear_error_and_the_rig_goes_on(
    corral_home: CorralHome, fake: FakeAdbd, why: str
) -> None:
    """The device's dump is untrusted: one corral cannot read answers inspect with an
    error saying so (it was an internal error of the gateway), the screenshot masked whole,
    and the rig and its lease stay: once the device dumps a tree again, inspect reads it."""
    serial = f"127.0.0.1:{fake.port}"
    rigs = manager_for(corral_home, serial, Clock())
    try:
        fake.device.dump_text = BAD_DUMPS[why]
        refused = await rigs.handle("alice", "mobile_use", {"verb": "inspect"})
        assert refused.is_error, refused
        text = refused.content[0].text
        assert "UI could not be read" in text and why in text, text
        shot = await rigs.handle("alice", "mobile_use", {"verb": "screenshot"})
        assert not shot.is_error and shot.images, shot
        assert {c for _, c in png_image(shot.images[0].png).getcolors() or []} == {(0, 0, 0)}
        assert rigs.mobile.leases == {serial: "alice"}
        fake.device.dump_text = None
        read = await rigs.handle("alice", "mobile_use", {"verb": "inspect"})
        assert not read.is_error and "id=password" in read.content[0].text, read
        events = [e["event"] for e in AuditLog(corral_home.audit_file).read()]
        assert events.count("rig_started") == 1 and "rig_ended" not in events
    finally:
        await rigs.close_all()


async def test_a_device_added_to_config_toml_is_usable_without_a_restart(
    corral_home: CorralHome, fake: FakeAdbd
) -> None:
    """Visible = callable follows config.toml (issue 25 item 5): with no device configured
    mobile_use is refused by the gate; once config.toml lists one, the same running rig
    manager drives it; removed again, the rig ends and the device is released."""
    serial = f"127.0.0.1:{fake.port}"
    rigs = manager_for(corral_home, serial, Clock())
    corral_home.config_file.write_text("")
    try:
        refused = await rigs.handle("alice", "mobile_use", {"verb": "inspect"})
        assert refused.is_error and "not available on this server" in refused.text, refused.text
        assert "[rigs.android] devices" in refused.text
        assert fake.device.events == [] and rigs.mobile.leases == {}

        corral_home.config_file.write_text(f'[rigs.android]\ndevices = ["{serial}"]\n')
        driven = await rigs.handle("alice", "mobile_use", {"verb": "key", "key": "BACK"})
        assert not driven.is_error, driven.text
        assert fake.device.events[-1] == "input keyevent KEYCODE_BACK"

        corral_home.config_file.write_text("")
        assert await rigs.expire() == [("alice", "android", "")]
        assert rigs.mobile.leases == {}
    finally:
        await rigs.close_all()


ONE, TWO, THREE = ("c" + d * 16 for d in "123")


async def test_each_conversation_has_its_own_rig_and_it_ends_with_the_conversation(
    corral_home: CorralHome, fake: FakeAdbd
) -> None:
    """A machine per conversation (issue 25 item 1), on the gateway's rig manager: two
    conversations of one agent lease two devices; each lists and closes its own; a
    conversation its front said ended, or one not heard of for the lease time, loses its
    rig and the device is released."""
    clock = Clock()
    with FakeAdbd() as other:
        first, second = f"127.0.0.1:{fake.port}", f"127.0.0.1:{other.port}"
        rigs = manager_for(corral_home, first, clock)
        corral_home.config_file.write_text(f'[rigs.android]\ndevices = ["{first}", "{second}"]\n')
        key = {"verb": "key", "key": "BACK"}
        try:
            for conversation in (ONE, TWO):
                done = await rigs.handle("alice", "mobile_use", key, conversation=conversation)
                assert not done.is_error, done.text
            assert sorted(rigs.mobile.leases) == sorted([first, second])
            assert fake.device.events and other.device.events  # one device each

            listed = (await rigs.handle("alice", "rig_list", {}, conversation=ONE)).structured
            assert listed is not None and len(listed["rigs"]) == 1 and listed["others"] == 1
            seats = {rig.seat for rig in rigs.surfaces()}
            assert seats == {"alice.android", f"alice.android-{TWO[1:7]}"}

            closed = (await rigs.handle("alice", "rig_close", {}, conversation=ONE)).structured
            assert closed is not None and len(closed["closed"]) == 1
            assert [k[2] for k in rigs.rigs] == [TWO]

            rigs.conversations.lease("alice", [], [TWO])
            assert await rigs.expire() == [("alice", "android", TWO)]
            assert rigs.mobile.leases == {}
            assert "its conversation ended" in rigs.ended[("alice", "android", TWO)]

            await rigs.handle("alice", "mobile_use", key, conversation=THREE)
            clock.now += 4  # heard of 4 s ago: still going
            assert await rigs.expire() == []
            clock.now += 2  # past the 5 s lease: its front is gone
            assert await rigs.expire() == [("alice", "android", THREE)]
            assert rigs.mobile.leases == {}
        finally:
            await rigs.close_all()


# ------------------------------------------------------------------ the command policy, attacked

BYPASSES = [
    ["pm", "install", "/sdcard/Download/evil.apk"],
    ["pm", "install", "-r", "-g", "/data/local/tmp/evil.apk"],
    ["pm", "grant", "com.example.notes", "android.permission.READ_SMS"],
    ["pm", "revoke", "com.example.notes", "android.permission.CAMERA"],
    ["settings", "put", "secure", "enabled_accessibility_services", "com.evil/.Svc"],
    ["settings", "delete", "global", "adb_enabled"],
    ["dumpsys", "notification", "--noredact"],
    ["getprop", "x;pm grant com.example.notes android.permission.READ_SMS"],
    ["wm", "size", "10x10"],
]


async def test_each_command_bypass_is_refused_and_the_device_runs_nothing(
    corral_home: CorralHome, fake: FakeAdbd
) -> None:
    rigs = manager_for(corral_home, f"127.0.0.1:{fake.port}", Clock())
    try:
        ok = await rigs.handle("alice", "mobile_use", {"verb": "command", "argv": ["getprop"]})
        assert not ok.is_error, ok
        assert fake.device.commands[-1] == ["getprop"]  # the control: a read-only form runs
        before = list(fake.device.commands)
        for argv in BYPASSES:
            refused = await rigs.handle("alice", "mobile_use", {"verb": "command", "argv": argv})
            text = refused.text
            assert refused.is_error and "argv: " in text and "allowed" in text, (argv, text)
        # judged by the device: it was asked to run nothing more, and nothing changed
        assert fake.device.commands == before
        assert fake.device.injected == []
        assert not any("install" in e or "grant" in e for e in fake.device.events)
    finally:
        await rigs.close_all()


# ------------------------------------------------------------------ the adb server, attacked

SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
# Another local user's process: an ADB host request (`host:devices`) to a unix socket.
ASK = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    s.sendall(b"000chost:devices")
    print("reached")
except OSError as e:
    print("refused", type(e).__name__)
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or SYSTEM_PYTHON is None,
    reason="needs root (to run a process as another user) and /usr/bin/python3",
)
async def test_another_local_user_cannot_reach_corral_s_adb_server(
    fake: FakeAdbd, short_dir: Path
) -> None:
    """uid 65534 asks corral's adb server for its devices and is refused by the kernel
    (its socket is in a 0700 directory; there is no TCP port), while corral drives the
    fake device through it. The control: the same process does reach a socket it may."""
    assert SYSTEM_PYTHON is not None
    serial = f"127.0.0.1:{fake.port}"
    server = AdbServer(config_for(serial).rigs.android, home_dir=short_dir)

    def ask(path: Path) -> str:
        done = subprocess.run(
            [SYSTEM_PYTHON, "-I", "-c", ASK, str(path)],
            user=65534,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    open_path = short_dir.parent / "open.sock"
    with socket.socket(socket.AF_UNIX) as control:
        control.bind(str(open_path))
        control.listen(1)
        open_path.chmod(0o777)
        assert ask(open_path).startswith("reached")  # the control: such a request works
    try:
        await server.states()
        assert server.socket_path is not None and server.process is not None
        assert ask(server.socket_path) == "refused PermissionError"
        assert tcp_listeners_of(server.process.pid) == []
        device = AndroidDevice(server.client, serial, 5)  # type: ignore[arg-type]
        await device.shell(["getprop", "ro.product.model"])
        assert fake.device.commands[-1] == ["getprop", "ro.product.model"]
        assert fake.device.commands.count(["getprop", "ro.product.model"]) == 1
    finally:
        await server.close()


async def test_a_rig_the_expiry_loop_ended_under_a_failing_call_is_said_in_that_call(
    corral_home: CorralHome, fake: FakeAdbd
) -> None:
    """Series run g-3: a rig's surface broke under a call, and the gateway's 1 s expiry
    loop ended the rig before the call's own answer was made; the answer said only that
    the surface stopped answering. The loop is run in that window here (after the device
    was lost mid-call, before the error reaches the answer): the answer says the rig ended
    and why, once."""
    rigs = manager_for(corral_home, f"127.0.0.1:{fake.port}", Clock())
    try:
        first = await rigs.handle("alice", "mobile_use", {"verb": "key", "key": "BACK"})
        assert not first.is_error, first
        (rig,) = rigs.rigs.values()
        run = rig.run

        async def run_then_expire(*args: Any, **kwargs: Any) -> Any:
            try:
                return await run(*args, **kwargs)
            finally:
                assert await rigs.expire() == [("alice", "android", "")]

        rig.run = run_then_expire  # type: ignore[method-assign]
        fake.drop_on = "screencap"
        failed = await rigs.handle("alice", "mobile_use", {"verb": "screenshot"})
        text = failed.content[0].text
        assert failed.is_error and f"Your android rig {rig.id} ended: its channel" in text, text
        assert "the next mobile_use call starts a new one" in text, text
        assert ("alice", "android", "") not in rigs.ended  # said once, here
    finally:
        await rigs.close_all()


async def test_a_rig_the_expiry_loop_is_still_removing_is_said_ended_only_once_removed(
    corral_home: CorralHome, fake: FakeAdbd
) -> None:
    """CI stop 63: the expiry loop ended a broken rig and was still removing its container
    when the failing call made its answer ("ended; the next call starts a new one"), and
    the container was still there. The answer now waits for that removal; so does a new
    rig of the same key. The removal is held open here until the call is known to wait."""
    rigs = manager_for(corral_home, f"127.0.0.1:{fake.port}", Clock())
    order: list[str] = []
    removing, release = anyio.Event(), anyio.Event()
    try:
        first = await rigs.handle("alice", "mobile_use", {"verb": "key", "key": "BACK"})
        assert not first.is_error, first
        (rig,) = rigs.rigs.values()
        run, close = rig.run, rig.close

        async def held_close() -> None:
            removing.set()
            await release.wait()
            await close()
            order.append("removed")

        async with anyio.create_task_group() as tg:

            async def run_then_expire(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await run(*args, **kwargs)
                finally:
                    tg.start_soon(rigs.expire)  # the loop's end, in a task of its own
                    await removing.wait()

            async def call() -> None:
                failed = await rigs.handle("alice", "mobile_use", {"verb": "screenshot"})
                order.append("answered")
                text = failed.content[0].text
                assert failed.is_error and f"rig {rig.id} ended: its channel" in text, text

            async def again() -> None:  # the next call: its start waits for the old rig gone
                await removing.wait()
                done = await rigs.handle("alice", "mobile_use", {"verb": "key", "key": "BACK"})
                order.append("started")  # (the dropped fake is offline now: no new rig)
                assert "held by another agent" not in done.content[0].text, done

            rig.run = run_then_expire  # type: ignore[method-assign]
            rig.close = held_close  # type: ignore[method-assign]
            fake.drop_on = "screencap"
            tg.start_soon(call)
            tg.start_soon(again)
            await removing.wait()
            await anyio.wait_all_tasks_blocked()
            assert order == []  # both calls wait on the removal
            release.set()
        assert order[0] == "removed" and sorted(order[1:]) == ["answered", "started"], order
    finally:
        await rigs.close_all()
