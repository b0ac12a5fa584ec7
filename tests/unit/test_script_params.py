"""execute_program parameters (SPEC S1.3, S1.8): errors name the parameter and its range."""

from __future__ import annotations

import pytest

from sandboxes.script_policy import CODE_MAX_BYTES, ParamError, parse_params

pytestmark = pytest.mark.unit


def param_error(**raw: object) -> str:
    with pytest.raises(ParamError) as info:
        parse_params(raw)
    return str(info.value)


def test_timeout_defaults_to_30_seconds_and_language_to_python() -> None:
    params = parse_params({"code": "print(1)"})

    assert params.timeout_seconds == 30
    assert params.language == "python"
    assert params.code == "print(1)"


@pytest.mark.parametrize("timeout", [1, 30, 299, 300])
def test_timeouts_from_1_to_300_are_accepted_unchanged(timeout: int) -> None:
    assert parse_params({"code": "x", "timeout_seconds": timeout}).timeout_seconds == timeout


@pytest.mark.parametrize("timeout", [0, -1, 301, 600, 10_000])
def test_a_timeout_outside_1_to_300_is_an_error_naming_the_parameter(timeout: int) -> None:
    message = param_error(code="x", timeout_seconds=timeout)

    assert "timeout_seconds" in message
    assert "1 to 300" in message
    assert repr(timeout) in message


def test_a_numeric_string_timeout_is_accepted_as_an_integer() -> None:
    params = parse_params({"code": "x", "timeout_seconds": "12"})

    assert params.timeout_seconds == 12
    assert isinstance(params.timeout_seconds, int)


@pytest.mark.parametrize("timeout", ["twelve", "12.5", 12.5, None, ""])
def test_a_timeout_that_is_not_a_whole_number_is_an_error(timeout: object) -> None:
    message = param_error(code="x", timeout_seconds=timeout)

    assert "timeout_seconds" in message
    assert "1 to 300" in message


@pytest.mark.parametrize("language", ["python", "bash", "sh"])
def test_each_supported_language_is_accepted(language: str) -> None:
    assert parse_params({"code": "x", "language": language}).language == language


@pytest.mark.parametrize("language", ["ruby", "Python", "python3", "node", ""])
def test_an_unsupported_language_is_an_error_naming_the_language_parameter(
    language: str,
) -> None:
    message = param_error(code="x", language=language)

    assert message.startswith("language:")
    assert "'python', 'bash', 'sh'" in message
    assert repr(language) in message


def test_empty_code_is_an_error_naming_code() -> None:
    message = param_error(code="")

    assert message.startswith("code:")
    assert "non-empty" in message


def test_missing_code_is_an_error_saying_it_is_required() -> None:
    message = param_error(language="python")

    assert message.startswith("code: required")


def test_an_unknown_parameter_is_an_error_listing_the_allowed_ones() -> None:
    message = param_error(code="x", timeout=5)

    assert "timeout:" in message
    assert "unknown parameter" in message
    assert "code, language, timeout_seconds" in message


def test_every_bad_parameter_is_reported_at_once() -> None:
    message = param_error(code="", language="ruby", timeout_seconds=0)

    assert "code:" in message
    assert "language:" in message
    assert "timeout_seconds:" in message


def test_code_of_exactly_1_mib_is_accepted() -> None:
    code = "#" * CODE_MAX_BYTES

    assert len(parse_params({"code": code}).code) == CODE_MAX_BYTES


def test_code_over_1_mib_is_an_error_giving_the_limit() -> None:
    message = param_error(code="#" * (CODE_MAX_BYTES + 1))

    assert message.startswith("code:")
    assert str(CODE_MAX_BYTES) in message
    assert f"{CODE_MAX_BYTES + 1} bytes" in message


def test_the_code_limit_counts_utf8_bytes_not_characters() -> None:
    code = "\u00e9" * (CODE_MAX_BYTES // 2 + 1)  # fewer characters than the limit, more bytes

    message = param_error(code=code)

    assert message.startswith("code:")
    assert f"{CODE_MAX_BYTES + 2} bytes" in message


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_timeout_is_an_error_not_one_second(value: bool) -> None:
    with pytest.raises(ParamError, match="timeout_seconds"):
        parse_params({"code": "print(1)", "timeout_seconds": value})
