"""`corral grants add|revoke|list` edit the file the MCP front's gate reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from corral_cli.main import main
from orchestrator.agents.view import load_view
from orchestrator.home import CorralHome

pytestmark = pytest.mark.unit


def _corral(home: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env={"CORRAL_HOME": str(home)})
    return result.exit_code, result.output


def test_grant_add_list_and_revoke_round_trip_through_the_gates_view(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path)
    assert _corral(tmp_path, "grants", "add", "alice", "computer_navigate") == (
        0,
        "granted computer_navigate to alice\n",
    )
    assert load_view(home, "alice").grants == {"computer_navigate"}
    assert _corral(tmp_path, "grants", "list", "alice") == (0, "computer_navigate\n")
    code, out = _corral(tmp_path, "grants", "add", "alice", "computer_navigate")
    assert (code, out) == (0, "alice already holds computer_navigate\n")
    assert _corral(tmp_path, "grants", "revoke", "alice", "computer_navigate")[0] == 0
    assert load_view(home, "alice").grants == frozenset()


def test_grants_refuse_a_bad_agent_name(tmp_path: Path) -> None:
    code, out = _corral(tmp_path, "grants", "add", "Bad Name", "x")
    assert code == 2 and "not a valid agent name" in out
    assert not (tmp_path / "agents").exists() or not any((tmp_path / "agents").iterdir())
