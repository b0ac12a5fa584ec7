"""`[recording]` in config.toml (issue 24): every key's range, checked at the edge with a
message naming the key; the defaults."""

from __future__ import annotations

import pytest

from orchestrator.config import parse_config
from orchestrator.errors import ConfigError


def test_the_recording_defaults() -> None:
    recording = parse_config({}, "config.toml").recording
    assert (recording.enabled, recording.fps, recording.keep_days) == (True, 4, 30)
    assert recording.max_total_mb == 2048


@pytest.mark.parametrize(
    ("key", "bad", "says"),
    [
        ("fps", 0, "greater than or equal to 1"),
        ("fps", 16, "less than or equal to 15"),
        ("keep_days", 0, "greater than or equal to 1"),
        ("keep_days", 3651, "less than or equal to 3650"),
        ("max_total_mb", 15, "greater than or equal to 16"),
        ("max_total_mb", 1024 * 1024 + 1, "less than or equal to 1048576"),
        ("fps", 2.5, "valid integer"),
        ("fps", True, "valid integer"),
        ("enabled", "yes", "valid boolean"),
        ("enabled", 1, "valid boolean"),
    ],
)
def test_each_recording_key_is_checked_and_named(key: str, bad: object, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"recording": {key: bad}}, "config.toml")
    assert f"recording.{key}" in str(info.value)
    assert says in str(info.value)


def test_the_edges_of_each_range_are_taken() -> None:
    low = {"fps": 1, "keep_days": 1, "max_total_mb": 16, "enabled": False}
    high = {"fps": 15, "keep_days": 3650, "max_total_mb": 1024 * 1024}
    assert parse_config({"recording": low}, "config.toml").recording.fps == 1
    assert parse_config({"recording": high}, "config.toml").recording.max_total_mb == 1024**2
