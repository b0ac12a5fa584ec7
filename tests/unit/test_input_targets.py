"""Issue 22 item 2: the one reader of what an input acts on (orchestrator/surfaces/acts_on.py,
the kiosk's and the desktop rig's) and the phones' (sandboxes/mobile_ui.py), judged by
the same approval rules. The channel here is a stub that answers the agent's `target` and
`focused` ops as told; the real agents are in tests/e2e (test_activation_rules.py for the
kiosk, test_rules_everywhere.py for the desktop rig and the phone simulators)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.config import ComputerUseConfig
from orchestrator.errors import KioskError
from orchestrator.surfaces.acts_on import input_hold
from sandboxes import rig_params as r
from sandboxes.mobile_ui import (
    MAX_ELEMENTS,
    focused_target,
    parse_android,
    parse_ios,
    tap_target,
)
from sandboxes.params import ClickParams, KeyParams, TypeParams

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

CFG = ComputerUseConfig(confirm_words=["delete"], confirm_urls=[])


class Channel:
    """Answers `target` by point and the focus op (the kiosk's `focused`, the desktop's
    `focus_target`) with one answer; an Exception is raised."""

    name = "desktop"

    def __init__(self, targets: dict[tuple[int, int], Any], focused: Any = None) -> None:
        self.targets, self.focused, self.ops = targets, focused, []

    async def request(self, op: str, deadline: float, **fields: Any) -> dict[str, Any]:
        self.ops.append(op)
        answer = self.targets.get((fields["x"], fields["y"])) if op == "target" else self.focused
        if isinstance(answer, Exception):
            raise answer
        return dict(answer or {"name": "", "role": "panel", "text": "", "error": None})


BUTTON = {"name": "Delete everything", "role": "push button", "text": "", "error": None}


def desktop(verb: dict[str, Any]) -> Any:
    return r.DesktopUseParams.model_validate(verb).verb


async def test_a_desktop_click_or_drag_onto_a_covered_button_is_held_and_elsewhere_not() -> None:
    channel = Channel({(5, 5): BUTTON})
    click = desktop({"verb": "click", "x": 5, "y": 5})
    hold = await input_hold(channel, click, CFG)  # type: ignore[arg-type]
    assert hold is not None and hold.rule == "confirm_words: delete"
    assert "Delete everything" in hold.description
    elsewhere = desktop({"verb": "click", "x": 6, "y": 5, "button": "right"})
    assert await input_hold(channel, elsewhere, CFG) is None  # type: ignore[arg-type]
    # A drag presses at its start and releases at its end: either end on the button holds.
    drag = desktop({"verb": "drag", "x": 100, "y": 100, "to_x": 5, "to_y": 5})
    assert await input_hold(channel, drag, CFG) is not None  # type: ignore[arg-type]
    # The kiosk's click is the same code.
    kiosk = ClickParams(x=5, y=5)
    assert await input_hold(channel, kiosk, CFG) is not None  # type: ignore[arg-type]


async def test_an_unreadable_target_is_held_and_no_rule_reads_nothing() -> None:
    channel = Channel({(5, 5): KioskError("the desktop could not target: AT-SPI: stuck")})
    hold = await input_hold(channel, desktop({"verb": "click", "x": 5, "y": 5}), CFG)  # type: ignore[arg-type]
    assert hold is not None and "name is unknown" in hold.description, hold
    unread = Channel({(5, 5): {"name": None, "error": "a pop-up is at that point"}})
    hold = await input_hold(unread, desktop({"verb": "click", "x": 5, "y": 5}), CFG)  # type: ignore[arg-type]
    assert hold is not None and "a pop-up" in hold.description
    none = ComputerUseConfig(confirm_words=[], confirm_urls=[])
    assert await input_hold(channel, desktop({"verb": "click", "x": 5, "y": 5}), none) is None  # type: ignore[arg-type]
    assert channel.ops == ["target"]  # no rule: nothing was even read


@pytest.mark.parametrize(
    "verb",
    [
        {"verb": "key", "key": "Return"},
        {"verb": "key", "key": "space"},
        {"verb": "type", "text": "12\n"},
    ],
)
async def test_an_activating_desktop_key_is_judged_by_the_focused_element(
    verb: dict[str, Any],
) -> None:
    on_button = Channel({}, {**BUTTON, "submit": None})
    hold = await input_hold(on_button, desktop(verb), CFG, focus_op="focus_target")  # type: ignore[arg-type]
    assert hold is not None and "Delete everything" in hold.description, hold
    assert on_button.ops == ["focus_target"]  # the desktop's op (its `focused` is codrive's)
    field = {"name": "Amount", "role": "entry", "text": "", "error": None, "submit": BUTTON}
    in_form = await input_hold(Channel({}, field), desktop(verb), CFG)  # type: ignore[arg-type]
    if verb.get("key") == "space":
        assert in_form is None  # a space in a text field types a space
    else:
        assert in_form is not None and "Delete everything" in in_form.description
    unread = Channel({}, KioskError("the desktop could not focused: unknown op 'focused'"))
    assert await input_hold(unread, desktop(verb), CFG) is not None  # type: ignore[arg-type]


async def test_keys_and_text_that_cannot_activate_read_nothing() -> None:
    channel = Channel({}, {**BUTTON, "submit": None})
    for verb in ({"verb": "key", "key": "Tab"}, {"verb": "type", "text": "delete me"}):
        assert await input_hold(channel, desktop(verb), CFG) is None  # type: ignore[arg-type]
    assert await input_hold(channel, KeyParams(key="a"), CFG) is None  # type: ignore[arg-type]
    assert await input_hold(channel, TypeParams(text="x"), CFG) is None  # type: ignore[arg-type]
    assert channel.ops == []


ANDROID = (
    '<hierarchy rotation="0"><node class="android.widget.FrameLayout" bounds="[0,0][540,960]">'
    '<node class="android.widget.EditText" text="" resource-id="a:id/amount" clickable="true" '
    'focusable="true" focused="{field}" bounds="[40,100][500,160]"/>'
    '<node class="android.widget.LinearLayout" clickable="true" focused="false" '
    'bounds="[40,300][500,400]"><node class="android.widget.TextView" text="Delete account" '
    'focused="false" bounds="[60,320][300,380]"/></node>'
    '<node class="android.widget.Button" text="Delete" focused="{button}" clickable="true" '
    'bounds="[40,500][500,580]"/></node></hierarchy>'
)


def test_a_tap_is_judged_by_the_deepest_acting_element_at_its_point_with_its_texts() -> None:
    tree = parse_android(ANDROID.format(field="false", button="false"))
    row = tap_target(tree, 100, 350)  # on the TextView, inside the clickable row
    assert (row["role"], row["text"]) == ("LinearLayout", "Delete account")
    assert tap_target(tree, 100, 540)["name"] == "Delete"
    assert tap_target(tree, 5, 5) == {
        "name": "",
        "role": None,
        "text": "",
        "href": None,
        "error": None,
    }


def test_a_tree_cut_at_its_cap_is_unread_wherever_the_tap_is() -> None:
    many = "".join(
        f'<node class="android.widget.Button" text="b{i}" clickable="true" bounds="[0,0][10,10]"/>'
        for i in range(MAX_ELEMENTS + 5)
    )
    tree = parse_android(
        f'<hierarchy><node class="x" bounds="[0,0][9,9]">{many}</node></hierarchy>'
    )
    assert tree.truncated and tap_target(tree, 5, 5)["error"] is not None


def test_the_focused_android_node_and_a_text_fields_next_button() -> None:
    field = focused_target(parse_android(ANDROID.format(field="true", button="false")))
    assert field is not None and field["role"] == "EditText"
    assert field["submit"] is not None and field["submit"]["name"] == "Delete"
    button = focused_target(parse_android(ANDROID.format(field="false", button="true")))
    assert button is not None and (button["name"], button["submit"]) == ("Delete", None)
    unknown = ANDROID.replace('focused="{field}" ', "").replace('focused="false" ', "")
    assert focused_target(parse_android(unknown.replace('focused="{button}" ', ""))) is None


def test_a_key_on_a_tree_cut_before_its_focus_or_its_submit_button_is_unread() -> None:
    """Rows push the focused element, or the button a focused text field submits, past
    the tree's cut: what the key acts on is unknown, so the rules hold it."""
    rows = "".join(
        f'<node class="android.widget.TextView" text="row {i}" bounds="[0,0][1,1]"/>'
        for i in range(MAX_ELEMENTS)
    )
    cut = {"name": None, "role": None, "text": None, "href": None}
    cut["error"] = f"the UI tree was cut at {MAX_ELEMENTS} elements"
    before_all = ANDROID.replace('[540,960]">', f'[540,960]">{rows}', 1)
    for field, button in (("true", "false"), ("false", "true")):
        assert focused_target(parse_android(before_all.format(field=field, button=button))) == cut
    field_then_rows = ANDROID.replace(
        'bounds="[40,100][500,160]"/>', f'bounds="[40,100][500,160]"/>{rows}'
    )
    assert (
        focused_target(parse_android(field_then_rows.format(field="true", button="false"))) == cut
    )
    read = focused_target(parse_android(ANDROID.format(field="true", button="false")))
    assert read is not None and read["submit"]["name"] == "Delete"  # the control


def test_an_ios_tap_reads_the_element_at_the_point_in_points() -> None:
    xml = (
        '<XCUIElementTypeApplication type="XCUIElementTypeApplication" name="App" x="0" y="0" '
        'width="200" height="400"><XCUIElementTypeButton type="XCUIElementTypeButton" '
        'name="Delete" label="Delete" enabled="true" visible="true" x="20" y="330" width="160" '
        'height="40"/></XCUIElementTypeApplication>'
    )
    assert tap_target(parse_ios(xml), 100, 350)["name"] == "Delete"
    assert tap_target(parse_ios(xml), 100, 10)["name"] == "App"
