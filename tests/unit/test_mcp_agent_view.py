"""Reading an agent's files into an AgentView (SPEC S5.2, S5.4) and the grants file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.agents import grants as grants_module
from orchestrator.agents.grants import (
    add_grant,
    grants_file,
    read_grants,
    revoke_grant,
    write_grants,
)
from orchestrator.agents.view import load_view
from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from sandboxes.catalogue import BY_NAME
from sandboxes.visibility import AgentView, permission_refusal, visible_names
from tests.helpers import COMPUTER_TOOLS

pytestmark = pytest.mark.unit


@pytest.fixture
def home(tmp_path: Path) -> CorralHome:
    return CorralHome(root=tmp_path)


def write_agent(home: CorralHome, name: str, text: str | bytes) -> Path:
    path = home.agent_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ agent.toml


def test_a_missing_agent_toml_gives_the_default_view_without_a_file_problem(
    home: CorralHome,
) -> None:
    view = load_view(home, "ann")

    assert view == AgentView(name="ann", unavailable=view.unavailable)
    assert view.unavailable.keys() == {"mobile_use", "ios_use"}  # no config.toml: no phone
    assert view.file_problem is None
    assert visible_names(view) == {"execute_program"}
    assert permission_refusal(BY_NAME["execute_program"], view) is None


def test_the_new_agent_template_gives_the_same_tools_as_no_file(home: CorralHome) -> None:
    write_agent(home, "ann", render_new_agent("ann"))

    view = load_view(home, "ann")

    assert view.file_problem is None
    assert view.capabilities == frozenset()
    assert view.permissions == {"execute_program": True}
    assert visible_names(view) == {"execute_program"}


def test_computer_use_true_in_agent_toml_puts_the_capability_in_the_view(
    home: CorralHome,
) -> None:
    write_agent(home, "ann", 'name = "ann"\n[capabilities]\ncomputer_use = true\n')

    view = load_view(home, "ann")

    assert view.file_problem is None
    assert view.capabilities == {"computer_use"}
    assert visible_names(view) == COMPUTER_TOOLS | {"execute_program"}


def test_every_capabilities_key_of_agent_toml_reaches_the_view(home: CorralHome) -> None:
    write_agent(
        home,
        "ann",
        'name = "ann"\n'
        "[capabilities]\n"
        "codrive = true\n"
        "os_native = true\n"
        "read_only = true\n"
        'allowed_tools = ["codrive_*", "execute_program"]\n'
        'denied_tools = ["codrive_run"]\n'
        'scoped_tools = ["execute_program"]\n'
        "[permissions]\n"
        "execute_program = false\n",
    )

    view = load_view(home, "ann")

    assert view.file_problem is None
    assert view.capabilities == {"codrive"}
    assert view.read_only is True
    assert view.allowed_tools == ("codrive_*", "execute_program")
    assert view.denied_tools == ("codrive_run",)
    assert view.scoped_tools == ("execute_program",)
    assert view.permissions == {"execute_program": False}
    assert visible_names(view) == {"codrive_status"}


def test_permissions_execute_program_false_in_agent_toml_refuses_execute_program(
    home: CorralHome,
) -> None:
    write_agent(home, "ann", 'name = "ann"\n[permissions]\nexecute_program = false\n')

    view = load_view(home, "ann")

    assert "execute_program" in visible_names(view)
    refusal = permission_refusal(BY_NAME["execute_program"], view)
    assert refusal is not None
    assert "[permissions] execute_program = false" in refusal


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            'name = "ann"\n[capabilities]\ncomputer_use = tru\n', "not valid TOML", id="bad-toml"
        ),
        pytest.param(
            'name = "ann"\n[capabilities]\ncomputer_use = true\ncolour = "red"\n',
            "capabilities.colour",
            id="unknown-key",
        ),
        pytest.param(
            'name = "ann"\n[capabilities]\ncomputer_use = "yes please"\n',
            "capabilities.computer_use",
            id="bad-value",
        ),
        pytest.param("[capabilities]\ncomputer_use = true\n", "name", id="missing-name"),
    ],
)
def test_an_invalid_agent_toml_sets_file_problem_and_grants_no_capability(
    home: CorralHome, text: str, problem: str
) -> None:
    write_agent(home, "ann", text)

    view = load_view(home, "ann")

    assert view.file_problem is not None
    assert problem in view.file_problem
    assert view.capabilities == frozenset()
    assert visible_names(view) == {"execute_program"}
    refusal = permission_refusal(BY_NAME["execute_program"], view)
    assert refusal is not None
    assert "agent.toml could not be used" in refusal


def test_an_agent_toml_whose_name_is_another_agents_sets_file_problem(
    home: CorralHome,
) -> None:
    write_agent(home, "ann", 'name = "bob"\n[capabilities]\ncomputer_use = true\n')

    view = load_view(home, "ann")

    assert view.name == "ann"
    assert view.file_problem is not None
    assert "'bob'" in view.file_problem
    assert "'ann'" in view.file_problem
    assert view.capabilities == frozenset()
    assert permission_refusal(BY_NAME["execute_program"], view) is not None


def test_an_agent_toml_that_is_not_utf8_sets_file_problem_instead_of_raising(
    home: CorralHome,
) -> None:
    write_agent(home, "ann", b'name = "ann"\ndisplay_name = "\xff\xfe"\n')

    view = load_view(home, "ann")

    assert view.file_problem is not None
    assert view.capabilities == frozenset()
    assert permission_refusal(BY_NAME["execute_program"], view) is not None


def test_an_agent_toml_that_is_a_directory_sets_file_problem(home: CorralHome) -> None:
    home.agent_file("ann").mkdir(parents=True)

    view = load_view(home, "ann")

    assert view.file_problem is not None
    assert "cannot be read" in view.file_problem


def test_a_file_problem_keeps_the_grants(home: CorralHome) -> None:
    write_agent(home, "ann", "not toml at all [")
    add_grant(home, "ann", "execute_program")

    assert load_view(home, "ann").grants == {"execute_program"}


# ------------------------------------------------------------------ grants.json


def test_grants_add_read_revoke_round_trip(home: CorralHome) -> None:
    assert read_grants(home, "ann") == frozenset()

    assert add_grant(home, "ann", "codrive_run") is True
    assert add_grant(home, "ann", "computer_click") is True
    assert add_grant(home, "ann", "codrive_run") is False
    assert read_grants(home, "ann") == {"codrive_run", "computer_click"}

    assert revoke_grant(home, "ann", "codrive_run") is True
    assert revoke_grant(home, "ann", "codrive_run") is False
    assert read_grants(home, "ann") == {"computer_click"}
    assert read_grants(home, "bob") == frozenset()


def test_revoking_from_an_agent_without_grants_changes_nothing(home: CorralHome) -> None:
    assert revoke_grant(home, "ann", "codrive_run") is False
    assert not grants_file(home, "ann").exists()


def test_the_grants_file_is_a_sorted_json_list_beside_agent_toml(home: CorralHome) -> None:
    for tool in ("computer_type", "codrive_run", "execute_program"):
        add_grant(home, "ann", tool)

    path = grants_file(home, "ann")
    assert path == home.agent_file("ann").parent / "grants.json"
    assert json.loads(path.read_text()) == ["codrive_run", "computer_type", "execute_program"]


def test_writing_grants_leaves_no_temporary_file_behind(home: CorralHome) -> None:
    add_grant(home, "ann", "codrive_run")
    revoke_grant(home, "ann", "codrive_run")
    add_grant(home, "ann", "computer_click")

    assert sorted(p.name for p in grants_file(home, "ann").parent.iterdir()) == ["grants.json"]


def test_a_grants_write_that_fails_before_the_rename_leaves_the_old_file_whole(
    home: CorralHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_grant(home, "ann", "codrive_run")
    before = grants_file(home, "ann").read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(grants_module.os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        write_grants(home, "ann", frozenset({"codrive_run", "computer_click"}))

    assert grants_file(home, "ann").read_bytes() == before
    assert read_grants(home, "ann") == {"codrive_run"}


def test_a_grant_makes_a_scoped_tool_visible_and_a_revoke_hides_it(home: CorralHome) -> None:
    write_agent(home, "ann", 'name = "ann"\n[capabilities]\nscoped_tools = ["execute_program"]\n')
    assert visible_names(load_view(home, "ann")) == frozenset()

    add_grant(home, "ann", "execute_program")
    assert visible_names(load_view(home, "ann")) == {"execute_program"}

    revoke_grant(home, "ann", "execute_program")
    assert visible_names(load_view(home, "ann")) == frozenset()


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b'["codrive_run", ', id="truncated-list"),
        pytest.param(b"\xff\xfe\x00", id="not-utf8"),
        pytest.param(b"codrive_run\n", id="not-json"),
        pytest.param(b"5", id="a-number"),
        pytest.param(b"null", id="null"),
        pytest.param(b"true", id="a-boolean"),
        pytest.param(b'{"codrive_run": true}', id="an-object"),
        pytest.param(b'"codrive_run"', id="a-string"),
    ],
)
def test_a_corrupt_grants_json_grants_nothing(home: CorralHome, content: bytes) -> None:
    path = grants_file(home, "ann")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)

    assert read_grants(home, "ann") == frozenset()


def test_a_corrupt_grants_json_does_not_break_loading_the_view(home: CorralHome) -> None:
    write_agent(home, "ann", 'name = "ann"\n[capabilities]\nscoped_tools = ["codrive_status"]\n')
    grants_file(home, "ann").write_bytes(b"null")

    view = load_view(home, "ann")

    assert view.grants == frozenset()
    assert visible_names(view) == {"execute_program"}


def test_non_string_entries_in_grants_json_are_ignored(home: CorralHome) -> None:
    path = grants_file(home, "ann")
    path.parent.mkdir(parents=True)
    path.write_text('["codrive_run", 1, null, ["computer_click"], {"a": 1}]')

    assert read_grants(home, "ann") == {"codrive_run"}
