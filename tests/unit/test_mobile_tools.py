"""mobile_use / ios_use without a device: verbs validated at the edge, the allowlists,
UI trees parsed into refs and secret boxes, the config sections, the catalogue gate."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.config import CorralConfig
from orchestrator.errors import ConfigError, ParamError
from sandboxes.catalogue import BY_NAME, PACKAGE_INSTALL, RIG_TOOLS
from sandboxes.mobile_params import IosUseParams, MobileUseParams
from sandboxes.mobile_ui import MAX_ELEMENTS, UiTreeError, parse_android, parse_ios, scale_rects
from sandboxes.visibility import decide
from sandboxes.withhold import WITHHELD
from tests.simulators.fake_android import INJECTION, PASSWORD_BOX, DeviceState
from tests.simulators.fake_wda import SECURE, FakeWda
from tests.unit.test_rig_tools import view, visible_names

pytestmark = pytest.mark.mobile


def android(**args: Any) -> Any:
    return MobileUseParams.parse_verbs(args).verb


def ios(**args: Any) -> Any:
    return IosUseParams.parse_verbs(args).verb


# ------------------------------------------------------------------ verbs


def test_tap_takes_x_and_y_or_a_ref_never_both() -> None:
    assert android(verb="tap", x=10, y="20").y == 20
    assert android(verb="tap", ref="e3").ref == "e3"
    with pytest.raises(ParamError, match="ref: give either ref or x and y"):
        android(verb="tap", ref="e3", x=1, y=1)
    with pytest.raises(ParamError, match="x: required with y"):
        android(verb="tap", x=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"verb": "tap", "x": 8000, "y": 1}, "x"),
        ({"verb": "swipe", "x": 1, "y": 1, "to_x": 1, "to_y": 1, "duration_ms": 10}, "duration_ms"),
        ({"verb": "text", "text": ""}, "text"),
        ({"verb": "key", "key": "POWER"}, "key: 'POWER' is not allowed"),
        ({"verb": "start", "package": "not a package"}, "package"),
        ({"verb": "install", "file": "../../etc/passwd.apk"}, "file"),
        ({"verb": "install", "file": "app.zip"}, "file: must be an .apk"),
        ({"verb": "deep_link", "url": "file:///sdcard/secret"}, "file: scheme is refused"),
        ({"verb": "deep_link", "url": "https://a b"}, "url: must be scheme:rest"),
        ({"verb": "command", "argv": ["sh", "-c", "id"]}, "argv: 'sh' is not allowed"),
        ({"verb": "command", "argv": ["am", "start", "-d", "file:///x"]}, "'am' is not allowed"),
        ({"verb": "command", "argv": ["logcat"]}, "logcat needs -d"),
        ({"verb": "command", "argv": "getprop"}, "argv"),
        ({"verb": "fly"}, "verb: mobile_use has no verb 'fly'"),
        ({}, "verb: required"),
    ],
)
def test_bad_android_input_names_the_parameter(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        MobileUseParams.parse_verbs(args)


def test_a_key_may_be_written_with_its_keycode_prefix() -> None:
    assert android(verb="key", key="KEYCODE_BACK").key == "BACK"


def test_command_is_an_argv_and_shell_syntax_in_a_word_is_refused() -> None:
    assert android(verb="command", argv=["getprop", "ro.build.version.sdk"]).argv == [
        "getprop",
        "ro.build.version.sdk",
    ]
    with pytest.raises(ParamError, match="shell metacharacter"):
        android(verb="command", argv=["getprop", "x; pm uninstall com.example.notes"])
    with pytest.raises(ParamError, match="NUL or a newline"):
        android(verb="command", argv=["getprop", "a\nb"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"verb": "press_button", "button": "power"}, "button"),
        ({"verb": "install", "file": "App.apk"}, "file: must be an .app or .ipa"),
        ({"verb": "launch", "bundle_id": "com.example/../x"}, "bundle_id"),
        ({"verb": "simctl", "argv": ["erase", "all"]}, "argv: 'erase' is not allowed"),
        ({"verb": "simctl", "argv": ["boot"]}, "argv: 'boot' is not allowed"),
        ({"verb": "deep_link", "url": "javascript:alert(1)"}, "javascript: scheme is refused"),
    ],
)
def test_bad_ios_input_names_the_parameter(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        IosUseParams.parse_verbs(args)


def test_the_schemas_list_every_verb_and_forbid_other_keys() -> None:
    for tool, verbs in (
        ("mobile_use", {"devices", "inspect", "install", "command", "deep_link", "reset"}),
        ("ios_use", {"inspect", "press_button", "launch", "terminate", "simctl"}),
    ):
        schema = BY_NAME[tool].input_schema()
        assert verbs <= set(schema["properties"]["verb"]["enum"])
        assert {"x", "y", "ref"} <= set(schema["properties"])
        assert schema["additionalProperties"] is False


# ------------------------------------------------------------------ the gate


@pytest.mark.parametrize(
    ("flags", "rigs"),
    [
        ({"mobile_use"}, {"mobile_use", "rig_list", "rig_close"}),
        ({"ios_use"}, {"ios_use", "rig_list", "rig_close"}),
        ({"browser_use"}, {"browser_use", "rig_list", "rig_close"}),
    ],
)
def test_each_mobile_flag_shows_its_tool(flags: set[str], rigs: set[str]) -> None:
    assert visible_names(view(capabilities=frozenset(flags))) & RIG_TOOLS == rigs


def test_mobile_tools_declare_package_install_and_read_only_refuses_them() -> None:
    agent = view(capabilities=frozenset({"mobile_use", "ios_use"}), read_only=True)
    for name in ("mobile_use", "ios_use"):
        assert PACKAGE_INSTALL in BY_NAME[name].action_classes
        assert "processSpawn" in BY_NAME[name].action_classes
        decision = decide(BY_NAME[name], agent)
        assert not decision.visible and "read-only mode" in decision.message
    assert visible_names(agent) & RIG_TOOLS == {"rig_list"}


# ------------------------------------------------------------------ UI trees


def test_android_tree_has_refs_centres_and_hides_secret_text() -> None:
    tree = parse_android(DeviceState(typed="ann").ui_xml())
    text = tree.render()
    assert '- EditText "ann" id=user [ref=e3]' in text
    assert f"- EditText {WITHHELD} id=password [ref=e4]" in text and "••••" not in text
    assert INJECTION in text  # the device's text is shown (fenced later), not dropped
    x1, y1, x2, y2 = PASSWORD_BOX
    assert tree.secret_rects == ((x1, y1, x2 - x1, y2 - y1),)
    button = tree.by_ref("e5")
    assert button is not None and button.label == "Sign in"
    assert button.center == (270, 600)


def test_ios_tree_finds_the_secure_text_field_and_scales_it_to_pixels() -> None:
    tree = parse_ios(FakeWda().source())
    assert "- SecureTextField [secret field: value withheld]" in tree.render()
    assert tree.secret_rects == (SECURE,)
    assert scale_rects(tree.secret_rects, 2.0) == ((40, 400, 320, 60),)
    assert scale_rects(((1, 1, 1, 1),), 1.5) == ((1, 1, 2, 2),)  # rounded outwards


@pytest.mark.parametrize("device", ["android", "ios"])
@pytest.mark.parametrize("shape", ["crowd", "nesting"])
def test_a_secret_field_past_the_trees_cut_or_deep_in_it_is_still_masked(
    device: str, shape: str
) -> None:
    """A list longer than the tree's cut before the password field, or the screen nested
    deeper than Python's stack: the field's box is still the mask's (the cut limits what
    inspect shows, never what the screenshot masks), and the tree still parses."""
    knob = {shape: MAX_ELEMENTS + 10 if shape == "crowd" else 5000}
    if device == "android":
        tree = parse_android(DeviceState(**knob).ui_xml())  # type: ignore[arg-type]
        x1, y1, x2, y2 = PASSWORD_BOX
        box = (x1, y1, x2 - x1, y2 - y1)
    else:
        tree = parse_ios(FakeWda(**knob).source())  # type: ignore[arg-type]
        box = SECURE
    assert tree.secret_rects == (box,)
    if shape == "crowd":  # inspect shows the first MAX_ELEMENTS and says it was cut
        assert tree.truncated and len(tree.elements) == MAX_ELEMENTS
    else:  # the layouts alone are not kept: the form's depth is as without them
        assert not tree.truncated and max(e.depth for e in tree.elements) < 5


@pytest.mark.parametrize(
    ("xml", "message"),
    [
        ("not xml", "not XML"),
        ('<!DOCTYPE x [<!ENTITY a "b">]><hierarchy/>', "DTD or entities"),
        ("<hierarchy>" + " " * (9 * 1024 * 1024) + "</hierarchy>", "at most"),
    ],
)
def test_a_ui_dump_that_is_not_plain_xml_is_refused(xml: str, message: str) -> None:
    with pytest.raises(UiTreeError, match=message):
        parse_android(xml)


@pytest.mark.parametrize(
    "xml",
    [
        '<hierarchy><node class="a.EditText" password="true" bounds="[0,0][1e9,5]"/></hierarchy>',
        '<hierarchy><node class="a.EditText" password="true"/></hierarchy>',
        '<XCUIElementTypeSecureTextField type="XCUIElementTypeSecureTextField" x="inf" y="0" '
        'width="1" height="1"/>',
        '<XCUIElementTypeSecureTextField type="XCUIElementTypeSecureTextField" x="nan" y="0" '
        'width="1" height="1"/>',
    ],
)
def test_a_secret_field_whose_box_cannot_be_read_is_an_unreadable_tree(xml: str) -> None:
    """Its box was (0, 0, 0, 0) and nothing was masked (or, for an infinity, an
    OverflowError escaped the screenshot): now the tree is unreadable, so the screenshot
    is masked whole and a tap is held."""
    parse = parse_ios if xml.startswith("<XCUI") else parse_android
    with pytest.raises(UiTreeError, match="a secret field's b"):
        parse(xml)
    ordinary = xml.replace('password="true"', "").replace("SecureTextField", "StaticText")
    assert parse(ordinary).secret_rects == ()  # an ordinary element's box may be unreadable


# ------------------------------------------------------------------ config


def test_rigs_config_reads_devices_and_the_simulator() -> None:
    config = CorralConfig.model_validate(
        {
            "rigs": {
                "android": {"devices": ["emulator-5554", "127.0.0.1:5555"], "apk_dir": "/srv/apk"},
                "ios": {
                    "wda_url": "http://127.0.0.1:8100/",
                    "simulator_udid": "0A1B2C3D-0000-4000-8000-00000000ABCD",
                },
            }
        }
    )
    assert config.rigs.android.devices == ["emulator-5554", "127.0.0.1:5555"]
    assert config.rigs.ios.wda_url == "http://127.0.0.1:8100"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("[rigs.android]\ndevices = ['a b']\n", "neither a device serial"),
        ("[rigs.android]\ndevices = ['h:99999']\n", "the port must be 1-65535"),
        ("[rigs.android]\ndevices = ['x', 'x']\n", "listed twice"),
        ("[rigs.android]\nadb_port = 5037\n", "corral runs its own"),
        ("[rigs.android]\napk_dir = 'apks'\n", "absolute directory"),
        ("[rigs.ios]\nwda_url = 'ftp://x'\n", "http"),
        ("[rigs.ios]\nsimulator_udid = 'booted'\n", "UDID"),
        ("[rigs.ios]\nwda = 'x'\n", "wda"),
    ],
)
def test_bad_rigs_config_names_the_key(tmp_path: Any, section: str, message: str) -> None:
    from orchestrator.config import load_config

    path = tmp_path / "config.toml"
    path.write_text(section)
    with pytest.raises(ConfigError, match=message):
        load_config(path)
