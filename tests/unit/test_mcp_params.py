"""Tool parameters at the MCP edge (SPEC S1.8, S2.3-S2.7, S3.1): ranges, forms, no clamping."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel

from sandboxes import params as p
from sandboxes.catalogue import BY_NAME, CATALOGUE
from sandboxes.codrive import CodriveRunParams
from sandboxes.params import ParamError, validate

pytestmark = pytest.mark.unit

CLICK = {"x": 10, "y": 20}
SCROLL = {"x": 10, "y": 20}
CODRIVE = {"target_app": "galculator", "steps": [{"action": "click", "x": 1, "y": 1}]}
SCRIPT = {"code": "print(1)"}

# The smallest valid arguments of every tool.
MINIMAL_ARGS: dict[str, dict[str, Any]] = {
    "execute_program": SCRIPT,
    "computer_session_start": {},
    "computer_screenshot": {},
    "computer_click": CLICK,
    "computer_type": {"text": "hello"},
    "computer_key": {"key": "Return"},
    "computer_scroll": SCROLL,
    "computer_navigate": {"url": "https://example.com/"},
    "computer_session_stop": {},
    "codrive_run": CODRIVE,
    "codrive_status": {},
    "recording_list": {},
    "recording_get": {"recording_id": "k0123456789"},
    "browser_use": {"verb": "screenshot"},
    "computer_use": {"verb": "screenshot"},
    "mobile_use": {"verb": "screenshot"},
    "ios_use": {"verb": "screenshot"},
    "rig_list": {},
    "rig_close": {},
}


def param_error(model: type[BaseModel], args: dict[str, Any] | None) -> str:
    with pytest.raises(ParamError) as info:
        validate(model, args)
    return str(info.value)


def steps(count: int) -> list[dict[str, Any]]:
    return [{"action": "click", "x": 1, "y": 1}] * count


# ------------------------------------------------------------------ integer and length ranges

# (model, other args, parameter, lowest allowed, highest allowed, value builder)
RANGES = [
    pytest.param(p.SessionStartParams, {}, "width", 320, 1920, int, id="session_start.width"),
    pytest.param(p.SessionStartParams, {}, "height", 240, 1200, int, id="session_start.height"),
    pytest.param(p.ScrollParams, SCROLL, "amount", 1, 20, int, id="scroll.amount"),
    pytest.param(p.TypeParams, {}, "text", 1, 2000, lambda n: "a" * n, id="type.text"),
    pytest.param(CodriveRunParams, CODRIVE, "steps", 1, 50, steps, id="codrive_run.steps"),
    pytest.param(
        p.ExecuteProgramParams, SCRIPT, "timeout_seconds", 1, 300, int, id="execute.timeout"
    ),
]


@pytest.mark.parametrize(("model", "base", "name", "low", "high", "make"), RANGES)
def test_both_ends_of_each_range_are_accepted_unchanged(
    model: type[BaseModel], base: dict[str, Any], name: str, low: int, high: int, make: Any
) -> None:
    for value in (low, high):
        got = getattr(validate(model, {**base, name: make(value)}), name)
        assert (len(got) if isinstance(got, str | list) else got) == value
        if isinstance(got, str | int):
            assert got == make(value)


@pytest.mark.parametrize(("model", "base", "name", "low", "high", "make"), RANGES)
def test_one_past_either_end_of_each_range_is_refused_not_clamped(
    model: type[BaseModel], base: dict[str, Any], name: str, low: int, high: int, make: Any
) -> None:
    for value, bound in ((low - 1, low), (high + 1, high)):
        message = param_error(model, {**base, name: make(value)})
        assert message.startswith(f"{name}:"), message
        assert re.search(rf"\b{bound}\b", message), message


@pytest.mark.parametrize(("model", "base", "name", "low", "high", "make"), RANGES)
def test_an_out_of_range_error_names_the_parameter_and_its_whole_allowed_range(
    model: type[BaseModel], base: dict[str, Any], name: str, low: int, high: int, make: Any
) -> None:
    # params.py promises "an error that names the parameter and the allowed range", as
    # execute_program's "must be an integer from 1 to 300" does: both ends, whichever is hit.
    for value in (low - 1, high + 1):
        message = param_error(model, {**base, name: make(value)})
        assert name in message
        assert re.search(rf"\b{low}\b", message), f"lowest value {low} not named: {message}"
        assert re.search(rf"\b{high}\b", message), f"highest value {high} not named: {message}"


def test_session_start_defaults_to_1280_by_800_with_no_task() -> None:
    parsed = validate(p.SessionStartParams, {})

    assert (parsed.width, parsed.height, parsed.task) == (1280, 800, None)  # type: ignore[attr-defined]


# ------------------------------------------------------------------ computer_click


@pytest.mark.parametrize(
    ("x", "y"), [(0, 0), (1919, 1199), (640, 480)], ids=["origin", "far-corner", "middle"]
)
def test_click_coordinates_inside_the_largest_screen_are_accepted(x: int, y: int) -> None:
    parsed = validate(p.ClickParams, {"x": x, "y": y})

    assert (parsed.x, parsed.y) == (x, y)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "value"),
    [("x", -1), ("y", -1), ("x", 1920), ("y", 1200)],
    ids=["x-negative", "y-negative", "x-past-1919", "y-past-1199"],
)
def test_click_coordinates_outside_the_largest_screen_are_refused(name: str, value: int) -> None:
    message = param_error(p.ClickParams, {**CLICK, name: value})

    assert message.startswith(f"{name}:")
    assert repr(value) in message


def test_click_defaults_to_a_single_left_click() -> None:
    parsed = validate(p.ClickParams, CLICK)

    assert (parsed.button, parsed.double) == ("left", False)  # type: ignore[attr-defined]


@pytest.mark.parametrize("button", ["left", "right"])
def test_click_button_left_or_right_is_accepted(button: str) -> None:
    assert validate(p.ClickParams, {**CLICK, "button": button}).button == button  # type: ignore[attr-defined]


@pytest.mark.parametrize("button", ["middle", "LEFT", "", "left "])
def test_any_other_click_button_is_refused(button: str) -> None:
    message = param_error(p.ClickParams, {**CLICK, "button": button})

    assert message.startswith("button:")
    assert "'left'" in message
    assert "'right'" in message


def test_a_double_left_click_is_accepted() -> None:
    parsed = validate(p.ClickParams, {**CLICK, "button": "left", "double": True})

    assert parsed.double is True  # type: ignore[attr-defined]


@pytest.mark.parametrize("double", [True, "true"])
def test_a_double_right_click_is_refused(double: object) -> None:
    message = param_error(p.ClickParams, {**CLICK, "button": "right", "double": double})

    assert "double" in message
    assert "left" in message


def test_a_single_right_click_is_accepted() -> None:
    parsed = validate(p.ClickParams, {**CLICK, "button": "right", "double": "false"})

    assert (parsed.button, parsed.double) == ("right", False)  # type: ignore[attr-defined]


def test_click_accepts_numeric_strings_and_true_false_strings_as_int_and_bool() -> None:
    parsed = validate(p.ClickParams, {"x": "12", "y": "34", "double": "true"})

    assert parsed.x == 12 and type(parsed.x) is int  # type: ignore[attr-defined]
    assert parsed.y == 34 and type(parsed.y) is int  # type: ignore[attr-defined]
    assert parsed.double is True  # type: ignore[attr-defined]
    assert validate(p.ClickParams, {**CLICK, "double": "false"}).double is False  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "value"),
    [("x", "twelve"), ("x", "1.5"), ("y", ""), ("double", "maybe"), ("double", "2")],
)
def test_click_strings_that_are_not_numbers_or_booleans_are_refused(name: str, value: str) -> None:
    message = param_error(p.ClickParams, {**CLICK, name: value})

    assert message.startswith(f"{name}:")


def test_click_needs_x_and_y() -> None:
    message = param_error(p.ClickParams, {})

    assert "x: required" in message
    assert "y: required" in message


# ------------------------------------------------------------------ computer_type


def test_type_accepts_2000_characters_counted_as_characters_not_bytes() -> None:
    text = "é" * 2000  # 4000 UTF-8 bytes

    assert validate(p.TypeParams, {"text": text}).text == text  # type: ignore[attr-defined]


def test_type_refuses_2001_characters() -> None:
    message = param_error(p.TypeParams, {"text": "a" * 2001})

    assert message.startswith("text:")
    assert "2000" in message


def test_type_refuses_empty_text() -> None:
    message = param_error(p.TypeParams, {"text": ""})

    assert message.startswith("text:")


def test_type_needs_text() -> None:
    assert param_error(p.TypeParams, {}) == "text: required"


# ------------------------------------------------------------------ computer_key


@pytest.mark.parametrize(
    ("key", "pressed", "key_class"),
    [
        ("Return", "Return", "named"),
        ("enter", "Return", "named"),
        ("a", "a", "letter"),
        ("Q", "Q", "letter"),
        ("7", "7", "digit"),
        ("Page_Up", "Prior", "named"),
        ("PageDown", "Next", "named"),
        ("F5", "F5", "named"),
        ("ctrl+C", "ctrl+c", "chord"),
        ("ctrl+z", "ctrl+z", "chord"),
        ("shift+Tab", "shift+Tab", "chord"),
        ("shift+Left", "shift+Left", "chord"),
        ("shift+a", "shift+a", "chord"),
    ],
)
def test_the_documented_keys_and_chords_are_accepted(
    key: str, pressed: str, key_class: str
) -> None:
    params = validate(p.KeyParams, {"key": key})

    assert isinstance(params, p.KeyParams)
    assert (params.verdict.key, params.verdict.key_class) == (pressed, key_class)


@pytest.mark.parametrize(
    "key",
    [
        "ctrl+plus",
        "ctrl++",
        "ctrl+minus",
        "ctrl+0",
        "ctrl+equal",  # zoom
        "ctrl+t",
        "ctrl+n",
        "ctrl+w",
        "ctrl+l",
        "ctrl+s",
        "ctrl+p",
        "ctrl+o",  # browser
        "ctrl+shift+i",
        "ctrl+shift+Tab",
        "F12",
        "F11",
        "alt+Left",
        "alt+F4",
        "super+a",
        "meta+r",
        "shift+ctrl+c",
        "ctrl s",
        "a;b",
        "",
        "ctrl+s\n",
        "é",
        "$(reboot)",
        "a/b",
        " Return",
        "-",
        "Print",
        "Menu",
    ],
)
def test_every_other_key_is_refused_saying_what_is_allowed(key: str) -> None:
    message = param_error(p.KeyParams, {"key": key})

    assert message.startswith("key:")
    if key:
        assert "Allowed: letters, digits, Return" in message


# ------------------------------------------------------------------ computer_scroll


def test_scroll_defaults_to_down_by_3() -> None:
    parsed = validate(p.ScrollParams, SCROLL)

    assert (parsed.direction, parsed.amount) == ("down", 3)  # type: ignore[attr-defined]


@pytest.mark.parametrize("direction", ["up", "down"])
def test_scroll_direction_up_or_down_is_accepted(direction: str) -> None:
    parsed = validate(p.ScrollParams, {**SCROLL, "direction": direction})

    assert parsed.direction == direction  # type: ignore[attr-defined]


@pytest.mark.parametrize("direction", ["left", "right", "Up", ""])
def test_any_other_scroll_direction_is_refused(direction: str) -> None:
    message = param_error(p.ScrollParams, {**SCROLL, "direction": direction})

    assert message.startswith("direction:")


def test_scroll_amount_accepts_a_numeric_string() -> None:
    parsed = validate(p.ScrollParams, {**SCROLL, "amount": "5"})

    assert parsed.amount == 5 and type(parsed.amount) is int  # type: ignore[attr-defined]


# ------------------------------------------------------------------ computer_navigate


def test_navigate_accepts_a_url_of_exactly_2000_bytes() -> None:
    url = "https://example.com/" + "a" * 1978 + "é"  # 1998 ASCII + one 2-byte char
    assert len(url.encode()) == 2000

    assert validate(p.NavigateParams, {"url": url}).url == url  # type: ignore[attr-defined]


def test_navigate_counts_bytes_not_characters() -> None:
    url = "https://example.com/" + "a" * 1979 + "é"  # 2000 characters, 2001 bytes
    assert len(url) == 2000
    assert len(url.encode()) == 2001

    message = param_error(p.NavigateParams, {"url": url})

    assert message.startswith("url:")
    assert "2000 bytes" in message
    assert "2001" in message


def test_navigate_refuses_an_empty_url() -> None:
    assert param_error(p.NavigateParams, {"url": ""}).startswith("url:")


def test_navigate_needs_a_url() -> None:
    assert param_error(p.NavigateParams, {}) == "url: required"


# ------------------------------------------------------------------ codrive_run


def test_codrive_run_accepts_50_steps_and_refuses_51() -> None:
    assert len(validate(CodriveRunParams, {**CODRIVE, "steps": steps(50)}).steps) == 50  # type: ignore[attr-defined]

    message = param_error(CodriveRunParams, {**CODRIVE, "steps": steps(51)})
    assert message.startswith("steps:")
    assert "50" in message


def test_every_codrive_step_needs_an_action() -> None:
    args = {**CODRIVE, "steps": [{"action": "click", "x": 1, "y": 1}, {"x": 1, "y": 2}]}

    assert param_error(CodriveRunParams, args) == "steps.1.action: required"


@pytest.mark.parametrize("action", ["tap", "", "CLICK"])
def test_an_unknown_codrive_step_action_is_refused(action: str) -> None:
    message = param_error(CodriveRunParams, {**CODRIVE, "steps": [{"action": action}]})

    assert message.startswith("steps.0.action:")


def test_an_unknown_key_in_a_codrive_step_is_refused() -> None:
    args = {**CODRIVE, "steps": [{"action": "click", "x": 1, "y": 1, "button": "left"}]}

    assert param_error(CodriveRunParams, args) == "steps.0.button: unknown parameter"


def test_codrive_run_needs_a_target_app() -> None:
    assert param_error(CodriveRunParams, {"steps": steps(1)}) == "target_app: required"


def test_codrive_run_watch_mode_accepts_true_false_strings() -> None:
    parsed = validate(CodriveRunParams, {**CODRIVE, "watch_mode": "true"})

    assert parsed.watch_mode is True  # type: ignore[attr-defined]


# ------------------------------------------------------------------ execute_program via validate


@pytest.mark.parametrize("timeout", [1, 300])
def test_execute_program_timeouts_1_and_300_are_accepted(timeout: int) -> None:
    parsed = validate(p.ExecuteProgramParams, {**SCRIPT, "timeout_seconds": timeout})

    assert parsed.timeout_seconds == timeout  # type: ignore[attr-defined]


@pytest.mark.parametrize("timeout", [0, 301])
def test_execute_program_timeouts_0_and_301_are_refused_naming_1_to_300(timeout: int) -> None:
    message = param_error(p.ExecuteProgramParams, {**SCRIPT, "timeout_seconds": timeout})

    assert message.startswith("timeout_seconds:")
    assert "1 to 300" in message
    assert repr(timeout) in message


def test_execute_program_accepts_a_numeric_string_timeout() -> None:
    parsed = validate(p.ExecuteProgramParams, {**SCRIPT, "timeout_seconds": "12"})

    assert parsed.timeout_seconds == 12 and type(parsed.timeout_seconds) is int  # type: ignore[attr-defined]


def test_execute_program_through_validate_needs_code() -> None:
    message = param_error(p.ExecuteProgramParams, None)

    assert message.startswith("code: required")


@pytest.mark.parametrize("language", ["python", "bash", "sh"])
def test_execute_program_languages_are_accepted(language: str) -> None:
    parsed = validate(p.ExecuteProgramParams, {**SCRIPT, "language": language})

    assert parsed.language == language  # type: ignore[attr-defined]


# ------------------------------------------------------------------ every tool


def test_minimal_args_cover_the_whole_catalogue() -> None:
    assert set(MINIMAL_ARGS) == {spec.name for spec in CATALOGUE}


@pytest.mark.parametrize("tool", sorted(MINIMAL_ARGS))
def test_each_tools_minimal_arguments_are_valid(tool: str) -> None:
    validate(BY_NAME[tool].params, MINIMAL_ARGS[tool])


@pytest.mark.parametrize("tool", sorted(MINIMAL_ARGS))
def test_an_unknown_parameter_is_refused_by_every_tool(tool: str) -> None:
    message = param_error(BY_NAME[tool].params, {**MINIMAL_ARGS[tool], "bogus": 1})

    assert message.startswith("bogus: unknown parameter")


@pytest.mark.parametrize(
    "tool",
    ["computer_screenshot", "codrive_status", "computer_session_stop", "rig_list", "rig_close"],
)
def test_tools_without_required_parameters_accept_no_arguments_at_all(tool: str) -> None:
    validate(BY_NAME[tool].params, None)


def test_several_bad_parameters_are_all_named_in_one_error() -> None:
    message = param_error(p.ScrollParams, {"x": -1, "y": 5, "amount": 99, "direction": "left"})

    assert message.count(";") == 2
    for name in ("x:", "amount:", "direction:"):
        assert name in message
