"""Visible = callable for the tools whose use depends on the server's config as well as on
agent.toml (issue 25 item 5): a phone tool is listed only while a device of its kind is
configured in config.toml, and the refusal of a call says which setting is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.agents.view import ViewCache, load_view
from orchestrator.home import CorralHome
from sandboxes.catalogue import BY_NAME
from sandboxes.visibility import decide, visible_names

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
PHONES = 'name = "ann"\n[capabilities]\nmobile_use = true\nios_use = true\n'
ANDROID = '[rigs.android]\ndevices = ["127.0.0.1:5555"]\n'
IOS = '[rigs.ios]\nwda_url = "http://127.0.0.1:8100"\n'


@pytest.fixture
def home(tmp_path: Path) -> CorralHome:
    home = CorralHome(root=tmp_path)
    home.ensure()
    return home


def write(path: Path, text: str, *, age: float = 60.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (NOW - age, NOW - age))


def test_phone_tools_are_not_listed_while_no_device_is_configured(home: CorralHome) -> None:
    write(home.agent_file("ann"), PHONES + "browser_use = true\n")

    view = load_view(home, "ann")

    assert {"mobile_use", "ios_use"}.isdisjoint(visible_names(view))
    assert {"browser_use", "rig_list", "rig_close"} <= visible_names(view)
    android = decide(BY_NAME["mobile_use"], view)
    ios = decide(BY_NAME["ios_use"], view)
    assert not android.visible and "[rigs.android] devices" in android.message
    assert not ios.visible and "[rigs.ios] wda_url" in ios.message


def test_an_agent_with_only_phone_families_and_no_device_sees_no_rig_tool(
    home: CorralHome,
) -> None:
    write(home.agent_file("ann"), PHONES)

    view = load_view(home, "ann")

    assert visible_names(view) == {"execute_program"}
    refusal = decide(BY_NAME["rig_list"], view)
    assert "not available on this server" in refusal.message
    assert "[rigs.android] devices" in refusal.message and "[rigs.ios] wda_url" in refusal.message


@pytest.mark.parametrize(
    ("config", "listed", "hidden"),
    [
        (ANDROID, {"mobile_use"}, {"ios_use"}),
        (IOS, {"ios_use"}, {"mobile_use"}),
        (ANDROID + IOS, {"mobile_use", "ios_use"}, set()),
    ],
    ids=["android-only", "ios-only", "both"],
)
def test_a_configured_device_lists_its_family_only(
    home: CorralHome, config: str, listed: set[str], hidden: set[str]
) -> None:
    write(home.agent_file("ann"), PHONES)
    write(home.config_file, config)

    names = visible_names(load_view(home, "ann"))

    assert listed <= names and hidden.isdisjoint(names)
    assert {"rig_list", "rig_close"} <= names


def test_a_device_added_to_config_toml_is_seen_on_the_next_read(home: CorralHome) -> None:
    write(home.agent_file("ann"), PHONES)
    cache = ViewCache(clock=lambda: NOW)
    assert "mobile_use" not in visible_names(cache.get(home, "ann")[0])

    write(home.config_file, ANDROID, age=30.0)
    assert "mobile_use" in visible_names(cache.get(home, "ann")[0])

    home.config_file.unlink()
    assert "mobile_use" not in visible_names(cache.get(home, "ann")[0])


def test_a_config_toml_that_cannot_be_used_hides_the_phones_and_says_why(
    home: CorralHome,
) -> None:
    write(home.agent_file("ann"), PHONES + "browser_use = true\n")
    write(home.config_file, ANDROID + "surprise = 1\n")

    view = load_view(home, "ann")

    assert "mobile_use" not in visible_names(view)
    assert "browser_use" in visible_names(view)
    assert "config.toml could not be used" in decide(BY_NAME["mobile_use"], view).message
