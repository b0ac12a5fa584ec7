"""ios_use's path against the fake WebDriverAgent (HTTP on loopback) and the fake
`xcrun` on PATH; the fake's routes and corral's are checked against the route table of
WDA's own source (the pinned npm package, .cache/wda)."""

from __future__ import annotations

import io
import json
import os
import plistlib
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from PIL import Image

from orchestrator.config import ComputerUseConfig, CorralConfig
from orchestrator.errors import DeviceError
from orchestrator.surfaces.devices import MobileDevices
from orchestrator.surfaces.ios import wda as corral_wda
from orchestrator.surfaces.ios.rig import IosRig
from sandboxes.mobile_params import IosUseParams
from sandboxes.withhold import WITHHELD
from tests.fakes import png_claiming
from tests.simulators import fake_wda
from tests.simulators.fake_wda import SCALE, SECURE, SECURE_RGB, FakeWda
from tests.simulators.wda_routes import WDA_SOURCE, matches, route_table

pytestmark = [pytest.mark.anyio, pytest.mark.mobile]

UDID = "0A1B2C3D-0000-4000-8000-00000000ABCD"
FAKE_BIN = Path(__file__).resolve().parents[1] / "simulators" / "bin"


@pytest.fixture
def wda() -> Iterator[FakeWda]:
    fake = fake_wda.serve(FakeWda())
    try:
        yield fake
    finally:
        fake_wda.stop(fake)


@pytest.fixture
def simctl_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "simctl.json"
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SIMCTL_STATE", str(state))
    monkeypatch.setenv("FAKE_SIMCTL_UDID", UDID)
    return state


def pool_for(url: str, app_dir: Path | None = None, timeout: int = 5) -> MobileDevices:
    ios: dict[str, object] = {"wda_url": url, "simulator_udid": UDID, "timeout_seconds": timeout}
    if app_dir is not None:
        ios["app_dir"] = str(app_dir)
    return MobileDevices(CorralConfig.model_validate({"rigs": {"ios": ios}}))


@pytest.fixture
async def rig(wda: FakeWda, tmp_path: Path) -> AsyncIterator[IosRig]:
    (tmp_path / "apps").mkdir()
    pool = pool_for(wda.url, tmp_path / "apps")
    started = await pool.start_ios("r1", "alice", ComputerUseConfig(), 0.0)
    try:
        yield started
    finally:
        await started.close()
        await pool.close()


def verb(**args: object) -> object:
    return IosUseParams.parse_verbs(args).verb


# ------------------------------------------------------------------ the route table


def test_the_route_table_comes_from_wda_source_and_holds_only_real_routes() -> None:
    table = route_table()
    assert len(table) > 100, f"only {len(table)} routes read from {WDA_SOURCE}"
    assert ("GET", "/status") in table
    # facebook-wda's older routes are not in today's WDA: the check can fail
    assert not matches(table, "POST", "/session/:sessionID/wda/tap/0")
    assert not matches(table, "POST", "/session/:sessionID/wda/drag")


@pytest.mark.parametrize("route", sorted(fake_wda.ROUTES), ids=" ".join)
def test_every_fake_wda_route_is_a_real_wda_route(route: tuple[str, str]) -> None:
    assert matches(route_table(), *route), route


@pytest.mark.parametrize("route", corral_wda.ROUTES, ids=" ".join)
def test_every_route_corral_calls_is_a_real_wda_route_the_fake_serves(
    route: tuple[str, str],
) -> None:
    assert matches(route_table(), *route)
    assert route in fake_wda.ROUTES


# ------------------------------------------------------------------ the verbs


async def test_ios_verbs_reach_the_simulator(rig: IosRig, wda: FakeWda) -> None:
    assert (rig.width, rig.height) == (200, 400)
    assert len(wda.sessions) == 1
    text = (await rig.run(verb(verb="inspect"), "")).content[0].text
    assert "UNTRUSTED-DATA" in text and f"- SecureTextField {WITHHELD}" in text
    await rig.run(verb(verb="tap", ref="e5"), "")  # the Sign in button's centre
    await rig.run(verb(verb="tap", x=5, y=6), "")
    assert wda.taps == [(100.0, 300.0), (5.0, 6.0)]
    await rig.run(verb(verb="swipe", x=1, y=2, to_x=3, to_y=4, duration_ms=500), "")
    assert wda.drags == [{"fromX": 1, "fromY": 2, "toX": 3, "toY": 4, "duration": 0.5}]
    await rig.run(verb(verb="text", text="héllo"), "")
    assert wda.typed == "héllo"
    await rig.run(verb(verb="press_button", button="home"), "")
    assert wda.buttons == ["home"]
    await rig.run(verb(verb="launch", bundle_id="com.example.App"), "")
    assert wda.running == {"com.example.App"}
    done = await rig.run(verb(verb="terminate", bundle_id="com.example.App"), "")
    assert "Terminated com.example.App" in done.content[0].text
    await rig.run(verb(verb="deep_link", url="example://open?id=1"), "")
    assert wda.urls == ["example://open?id=1"]
    with pytest.raises(DeviceError, match=r"Application 'com\.nope\.App' is not installed"):
        await rig.run(verb(verb="launch", bundle_id="com.nope.App"), "")


async def test_the_screenshot_masks_the_secure_text_field_in_pixels(rig: IosRig) -> None:
    shot = await rig.run(verb(verb="screenshot"), "")
    assert len(shot.images) == 1
    image = Image.open(io.BytesIO(shot.images[0].png)).convert("RGB")
    assert image.size == (400, 800)
    x, y, w, h = (v * SCALE for v in SECURE)
    for point in ((x + 1, y + 1), (x + w - 2, y + h - 2), (x + w // 2, y + h // 2)):
        assert image.getpixel(point) == (0, 0, 0), point
    assert SECURE_RGB not in {c for _, c in image.getcolors(1_000_000) or []}
    assert image.getpixel((5, 5)) == (255, 255, 255)


@pytest.mark.parametrize("shape", ["crowd", "nesting"])
async def test_a_secure_field_past_the_sources_cut_or_deep_in_it_is_masked(
    rig: IosRig, wda: FakeWda, shape: str
) -> None:
    """WDA's source is untrusted: 2010 rows before the secure field (past the tree's cut of
    2000 elements), or the window nested 5000 elements deep (deeper than Python's stack).
    The screenshot still blacks the field out and answers."""
    setattr(wda, shape, 2010 if shape == "crowd" else 5000)
    shot = await rig.run(verb(verb="screenshot"), "")
    image = Image.open(io.BytesIO(shot.images[0].png)).convert("RGB")
    x, y, w, h = (v * SCALE for v in SECURE)
    assert image.getpixel((x + w // 2, y + h // 2)) == (0, 0, 0)
    assert SECURE_RGB not in {c for _, c in image.getcolors(1_000_000) or []}
    assert image.getpixel((5, 5)) == (255, 255, 255)  # the rest is shown


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("<XCUIElementTypeApplication", "not XML"),
        ('<!DOCTYPE x [<!ENTITY a "b">]><XCUIElementTypeApplication/>', "DTD or entities"),
        (
            '<XCUIElementTypeSecureTextField type="XCUIElementTypeSecureTextField" '
            'visible="true" x="NaN" y="0" width="10" height="10"/>',
            "box cannot be read",
        ),
    ],
    ids=["not-xml", "dtd", "secure-box-nan"],
)
async def test_an_unreadable_source_is_a_clear_error_and_the_rig_goes_on(
    rig: IosRig, wda: FakeWda, source: str, why: str
) -> None:
    """WDA's source is untrusted: one corral cannot read makes inspect fail with a
    DeviceError that says so (the rig manager answers it as the call's error; it was an
    internal error of the gateway) and does not end the rig; the screenshot is masked
    whole; once the source reads again, inspect answers."""
    wda.source_text = source
    with pytest.raises(DeviceError, match=f"UI could not be read: .*{why}") as caught:
        await rig.run(verb(verb="inspect"), "")
    assert not caught.value.lost and rig.broken is None
    shot = await rig.run(verb(verb="screenshot"), "")
    image = Image.open(io.BytesIO(shot.images[0].png)).convert("RGB")
    assert {c for _, c in image.getcolors(1_000_000) or []} == {(0, 0, 0)}
    wda.source_text = None
    assert "SecureTextField" in (await rig.run(verb(verb="inspect"), "")).content[0].text


async def test_inspect_never_shows_a_password_the_wda_source_gives_away(
    rig: IosRig, wda: FakeWda
) -> None:
    """Against the fake WebDriverAgent (a protocol-level simulator: W3C WebDriver over
    HTTP, its routes checked against WDA's own source): a source whose secure text field
    holds the password as its value, in an element inside it and in a preview label
    beside it. inspect shows the field and the label, never the value."""
    wda.leaked_password = "ios-pw-2718"
    inspected = await rig.run(verb(verb="inspect"), "")
    text = inspected.content[0].text
    assert "ios-pw-2718" not in text and "ios-pw-2718" not in repr(inspected.structured)
    assert f"- SecureTextField {WITHHELD}" in text
    assert f'"Preview: {WITHHELD}"' in text


async def test_install_uninstall_and_simctl_go_through_xcrun_argv(
    rig: IosRig, simctl_state: Path, tmp_path: Path
) -> None:
    app = tmp_path / "apps" / "Shop.app"
    app.mkdir()
    (app / "Info.plist").write_bytes(plistlib.dumps({"CFBundleIdentifier": "com.example.Shop"}))
    assert (
        "Installed Shop.app"
        in (await rig.run(verb(verb="install", file="Shop.app"), "")).content[0].text
    )
    listed = await rig.run(verb(verb="simctl", argv=["listapps"]), "")
    assert "com.example.Shop" in listed.content[0].text
    assert "UNTRUSTED-DATA" in listed.content[0].text
    await rig.run(verb(verb="simctl", argv=["ui", "appearance", "dark"]), "")
    await rig.run(verb(verb="uninstall", bundle_id="com.example.Shop"), "")
    state = json.loads(simctl_state.read_text())
    assert state["argv"] == [
        ["simctl", "install", UDID, str(app)],
        ["simctl", "listapps", UDID],
        ["simctl", "ui", UDID, "appearance", "dark"],
        ["simctl", "uninstall", UDID, "com.example.Shop"],
    ]
    assert state["apps"] == {}


async def test_without_xcrun_install_says_it_needs_macos(
    rig: IosRig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tmp_path / "apps" / "Shop.app").mkdir()
    with pytest.raises(DeviceError, match="only macOS with Xcode has"):
        await rig.run(verb(verb="install", file="Shop.app"), "")


# ------------------------------------------------------------------ failures


async def test_a_wda_error_is_a_clear_message_and_the_rig_stays(rig: IosRig, wda: FakeWda) -> None:
    wda.fail_with = (500, "unknown error", "The simulator is locked")
    with pytest.raises(DeviceError, match="unknown error: The simulator is locked") as caught:
        await rig.run(verb(verb="tap", x=1, y=1), "")
    assert not caught.value.lost and rig.broken is None


async def test_a_wda_that_claims_a_huge_window_is_refused_and_leaves_no_lease(
    wda: FakeWda,
) -> None:
    """Attack: WDA names a window of 60000x60000 points. The gateway allocated for that size
    (the whole-screen mask when the source could not be read); the rig is refused now."""
    wda.window = (60000, 60000)
    pool = pool_for(wda.url)
    try:
        with pytest.raises(DeviceError, match=r"window cannot be used: .*60000x60000"):
            await pool.start_ios("r1", "alice", ComputerUseConfig(), 0.0)
        assert pool.leases == {}
    finally:
        await pool.close()


async def test_a_screenshot_that_claims_a_huge_screen_is_answered_black(
    rig: IosRig, wda: FakeWda
) -> None:
    """Attack: WDA's screenshot is a small PNG whose header claims 60000x60000 pixels (a
    decompression bomb's header): the gateway never decodes it; the answer is black at
    the rig's own size and says why, and the rig goes on."""
    wda.screenshot_png = png_claiming(60000, 60000)
    shot = await rig.run(verb(verb="screenshot"), "")
    image = Image.open(io.BytesIO(shot.images[0].png)).convert("RGB")
    assert image.size == (rig.width, rig.height)
    assert {c for _, c in image.getcolors(1_000_000) or []} == {(0, 0, 0)}
    assert "60000x60000" in shot.content[-1].text and rig.broken is None
    wda.screenshot_png = None
    shown = await rig.run(verb(verb="screenshot"), "")
    assert Image.open(io.BytesIO(shown.images[0].png)).convert("RGB").getpixel((5, 5)) == (
        255,
        255,
        255,
    )


async def test_a_hanging_wda_is_cut_off_and_leaves_no_lease(wda: FakeWda) -> None:
    wda.hang = True
    pool = pool_for(wda.url, timeout=1)
    try:
        with pytest.raises(DeviceError, match="did not answer within 1 s"):
            await pool.start_ios("r1", "alice", ComputerUseConfig(), 0.0)
        assert pool.leases == {}
    finally:
        await pool.close()


async def test_an_unreachable_wda_leaves_no_lease() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    pool = pool_for(f"http://127.0.0.1:{port}")
    with pytest.raises(DeviceError, match="unreachable"):
        await pool.start_ios("r1", "alice", ComputerUseConfig(), 0.0)
    assert pool.leases == {}


async def test_a_restarted_wda_that_lost_the_session_ends_the_rig(
    rig: IosRig, wda: FakeWda
) -> None:
    wda.sessions.clear()  # what a WDA restart does
    with pytest.raises(DeviceError, match="invalid session id") as caught:
        await rig.run(verb(verb="inspect"), "")
    assert caught.value.lost and rig.broken is not None
