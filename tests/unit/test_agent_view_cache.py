"""The agent view cache: a changed agent.toml or grants.json is seen at once, an
unchanged one is not parsed again, and async callers read off the event loop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.agents import view as view_module
from orchestrator.agents.grants import add_grant, grants_file
from orchestrator.agents.view import ViewCache, view_of
from orchestrator.config.cached import RACY_SECONDS
from orchestrator.home import CorralHome

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0


@pytest.fixture
def home(tmp_path: Path) -> CorralHome:
    return CorralHome(root=tmp_path)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every parse the cache asks for, by agent."""
    seen: list[str] = []
    real = view_module.load_agent_and_view

    def counting(home: CorralHome, name: str) -> view_module.Loaded:
        seen.append(name)
        return real(home, name)

    monkeypatch.setattr(view_module, "load_agent_and_view", counting)
    return seen


def write_agent(home: CorralHome, text: str, *, age: float = 60.0) -> Path:
    path = home.agent_file("ann")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'name = "ann"\n[capabilities]\n{text}\n', encoding="utf-8")
    os.utime(path, (NOW - age, NOW - age))
    return path


def test_an_unchanged_agent_toml_is_parsed_once(home: CorralHome, parses: list[str]) -> None:
    write_agent(home, "codrive = true")
    cache = ViewCache(clock=lambda: NOW)

    first = cache.get(home, "ann")
    second = cache.get(home, "ann")

    assert parses == ["ann"]
    assert second is first
    assert first[0].capabilities == {"codrive"}


def test_a_changed_agent_toml_is_seen_on_the_next_read(home: CorralHome, parses: list[str]) -> None:
    write_agent(home, "codrive = true")
    cache = ViewCache(clock=lambda: NOW)
    cache.get(home, "ann")

    write_agent(home, "codrive = false", age=30.0)

    assert cache.get(home, "ann")[0].capabilities == frozenset()
    assert parses == ["ann", "ann"]


def test_a_new_grant_is_seen_on_the_next_read(home: CorralHome, parses: list[str]) -> None:
    write_agent(home, "read_only = false")
    cache = ViewCache(clock=lambda: NOW)
    assert cache.get(home, "ann")[0].grants == frozenset()

    add_grant(home, "ann", "execute_program")
    os.utime(grants_file(home, "ann"), (NOW - 10, NOW - 10))

    assert cache.get(home, "ann")[0].grants == {"execute_program"}
    assert cache.get(home, "ann")[0].grants == {"execute_program"}
    assert parses == ["ann", "ann"]


def test_a_deleted_agent_toml_falls_back_to_a_fresh_agent(
    home: CorralHome, parses: list[str]
) -> None:
    path = write_agent(home, "codrive = true")
    cache = ViewCache(clock=lambda: NOW)
    cache.get(home, "ann")

    path.unlink()

    assert cache.get(home, "ann")[0].capabilities == frozenset()


def test_a_file_changed_within_the_racy_window_is_read_every_time(
    home: CorralHome, parses: list[str]
) -> None:
    write_agent(home, "codrive = true", age=RACY_SECONDS / 2)
    cache = ViewCache(clock=lambda: NOW)

    cache.get(home, "ann")
    cache.get(home, "ann")

    assert parses == ["ann", "ann"]


def test_a_lookup_after_a_change_misses_and_a_read_with_its_stamps_is_kept(
    home: CorralHome, parses: list[str]
) -> None:
    """What the async reader does: stamps taken once, on the loop; on a miss, the read in a
    worker thread is kept under those stamps (the next lookup hits without a parse)."""
    write_agent(home, "codrive = true")
    cache = ViewCache(clock=lambda: NOW)
    stamps, kept = cache.lookup(home, "ann")
    assert kept is None
    read = cache.get(home, "ann", stamps)

    write_agent(home, "codrive = false", age=30.0)
    stamps, kept = cache.lookup(home, "ann")
    assert kept is None  # changed since it was read
    changed = cache.get(home, "ann", stamps)

    assert cache.lookup(home, "ann") == (stamps, changed)
    assert read[0].capabilities == {"codrive"} and changed[0].capabilities == frozenset()
    assert parses == ["ann", "ann"]


@pytest.mark.anyio
async def test_the_async_reader_answers_the_view(home: CorralHome) -> None:
    write_agent(home, "codrive = true")

    assert (await view_of(home, "ann")).capabilities == {"codrive"}
