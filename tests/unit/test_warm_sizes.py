"""How many surfaces of each kind the gateway keeps started ahead (issue 23, "fast by
default": `sandboxes.warm_sizes`, `[container.*] warm`, $CORRAL_WARM_DEFAULT)."""

from __future__ import annotations

import pytest

from orchestrator.config import parse_config
from orchestrator.errors import ConfigError
from orchestrator.home import Environment
from sandboxes.visibility import AgentView
from sandboxes.warm_sizes import kinds_in_use, warm_sizes

UNSET: dict[str, int | None] = {"kiosk": None, "browser": None, "desktop": None}


def view(*families: str, denied: tuple[str, ...] = ()) -> AgentView:
    return AgentView(name="a", capabilities=frozenset(families), denied_tools=denied)


def test_a_kind_is_in_use_when_some_agent_may_start_one() -> None:
    assert kinds_in_use([]) == frozenset()
    assert kinds_in_use([view()]) == frozenset()
    assert kinds_in_use([view("computer_use")]) == {"kiosk"}
    assert kinds_in_use([view("browser_use"), view("desktop_use")]) == {"browser", "desktop"}
    assert kinds_in_use([view("codrive")]) == {"desktop"}  # codrive's shared desktop
    # A family on but its starting tool denied starts nothing.
    assert kinds_in_use([view("browser_use", denied=("browser_use",))]) == frozenset()
    assert kinds_in_use([view("computer_use", denied=("computer_*",))]) == frozenset()


def test_sizes_default_to_one_per_kind_in_use_and_config_wins() -> None:
    assert warm_sizes(UNSET, frozenset(), 1) == {"kiosk": 0, "browser": 0, "desktop": 0}
    assert warm_sizes(UNSET, frozenset({"browser"}), 1) == {"kiosk": 0, "browser": 1, "desktop": 0}
    assert warm_sizes(UNSET, frozenset({"kiosk", "desktop"}), 0) == {
        "kiosk": 0,
        "browser": 0,
        "desktop": 0,
    }
    configured = {"kiosk": 0, "browser": 3, "desktop": None}
    all_kinds = frozenset({"kiosk", "browser", "desktop"})
    assert warm_sizes(configured, all_kinds, 1) == {"kiosk": 0, "browser": 3, "desktop": 1}
    # A configured size holds even when no agent uses the kind (the operator asked).
    assert warm_sizes({"kiosk": 2}, frozenset(), 1)["kiosk"] == 2


def test_the_warm_keys_are_unset_by_default_and_bounded() -> None:
    config = parse_config({}, "config.toml")
    assert config.container.warm_configured() == UNSET
    raw = {"container": {"kiosk": {"warm": 0}, "rigs": {"browser_warm": 2, "desktop_warm": 16}}}
    assert parse_config(raw, "config.toml").container.warm_configured() == {
        "kiosk": 0,
        "browser": 2,
        "desktop": 16,
    }
    for section, key, value in (
        ("kiosk", "warm", 17),
        ("rigs", "browser_warm", -1),
        ("rigs", "desktop_warm", 17),
        ("rigs", "browser_warm", "1"),  # a string is not a number
        ("kiosk", "warm", True),  # nor is a TOML boolean (the config models are strict)
    ):
        with pytest.raises(ConfigError) as info:
            parse_config({"container": {section: {key: value}}}, "config.toml")
        assert f"container.{section}.{key}" in str(info.value)


def test_the_default_comes_from_the_environment_and_is_checked() -> None:
    assert Environment.from_environ({}).warm_default == 1
    assert Environment.from_environ({"CORRAL_WARM_DEFAULT": "0"}).warm_default == 0
    assert Environment.from_environ({"CORRAL_WARM_DEFAULT": " 4 "}).warm_default == 4
    for bad in ("17", "-1", "one", "1.5"):
        with pytest.raises(ValueError, match="CORRAL_WARM_DEFAULT"):
            Environment.from_environ({"CORRAL_WARM_DEFAULT": bad})
