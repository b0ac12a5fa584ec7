"""CORRAL_HOME: where corral keeps its files (default ~/.corral, never touched here)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from orchestrator.home import CorralHome

pytestmark = pytest.mark.unit


def test_corral_home_comes_from_the_environment_variable(tmp_path: Path) -> None:
    home = CorralHome.from_env({"CORRAL_HOME": str(tmp_path / "h")})

    assert home.root == (tmp_path / "h").resolve()


def test_without_corral_home_the_default_is_dot_corral_in_the_home_directory() -> None:
    assert CorralHome.from_env({}).root == (Path.home() / ".corral").resolve()


def test_an_empty_corral_home_means_the_default() -> None:
    assert CorralHome.from_env({"CORRAL_HOME": ""}) == CorralHome.from_env({})


def test_a_relative_corral_home_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    home = CorralHome.from_env({"CORRAL_HOME": "rel/home"})

    assert home.root.is_absolute()
    assert home.root == (tmp_path / "rel" / "home").resolve()


def test_the_files_live_where_the_spec_says(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path)

    assert home.config_file == tmp_path / "config.toml"
    assert home.agent_file("alice") == tmp_path / "agents" / "alice" / "agent.toml"
    assert home.audit_file == tmp_path / "audit.jsonl"
    assert home.work_dir.parent == tmp_path


def test_ensure_creates_private_directories(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path / "new" / "home")

    home.ensure()

    for directory in (home.root, home.agents_dir, home.work_dir):
        assert directory.is_dir()
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_ensure_is_idempotent(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path / "h")
    home.ensure()
    (home.agents_dir / "keep.txt").write_text("x")

    home.ensure()

    assert (home.agents_dir / "keep.txt").read_text() == "x"
