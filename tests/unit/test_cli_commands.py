"""`corral agents new` through click's CliRunner, and `corral run`'s language inference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from corral_cli.main import main
from corral_cli.run import infer_language
from orchestrator.config import load_agent, render_new_agent

pytestmark = pytest.mark.unit


def corral(home: Path, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"CORRAL_HOME": str(home)})


def flat(text: str) -> str:
    """Rich wraps long lines at the terminal width; compare with whitespace collapsed."""
    return " ".join(text.split())


# ------------------------------------------------------------------ the environment


def test_a_corral_image_tag_that_is_not_a_docker_tag_is_a_usage_error(tmp_path: Path) -> None:
    env = {"CORRAL_HOME": str(tmp_path), "CORRAL_IMAGE_TAG": "a b"}
    result = CliRunner().invoke(main, ["agents", "list"], env=env)

    assert result.exit_code == 2
    assert "CORRAL_IMAGE_TAG='a b' is not a Docker tag" in flat(result.stderr)


# ------------------------------------------------------------------ agents new


def test_agents_new_writes_an_agent_toml_that_loads(tmp_path: Path) -> None:
    result = corral(tmp_path, "agents", "new", "alice")

    path = tmp_path / "agents" / "alice" / "agent.toml"
    assert result.exit_code == 0, result.output
    assert path.read_text() == render_new_agent("alice")
    assert load_agent(path).name == "alice"
    assert "wrote" in result.stdout


def test_agents_new_refuses_to_overwrite_an_existing_agent(tmp_path: Path) -> None:
    path = tmp_path / "agents" / "alice" / "agent.toml"
    path.parent.mkdir(parents=True)
    path.write_text('name = "alice"\n# hand-edited\n')

    result = corral(tmp_path, "agents", "new", "alice")

    assert result.exit_code == 1
    assert "already exists" in flat(result.stderr)
    assert path.read_text() == 'name = "alice"\n# hand-edited\n'


@pytest.mark.parametrize(
    "name", ["Alice", "1alice", "_x", "al ice", "../escape", "a" * 64, "alice\n"]
)
def test_agents_new_refuses_a_bad_name_with_exit_2_and_writes_nothing(
    tmp_path: Path, name: str
) -> None:
    result = corral(tmp_path, "agents", "new", name)

    assert result.exit_code == 2, (result.output, result.exception)
    assert "agent name" in flat(result.stderr)
    agents = tmp_path / "agents"
    assert not agents.exists() or list(agents.iterdir()) == []
    assert not (tmp_path / "escape").exists()


def test_agents_new_creates_corral_home_when_it_is_missing(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"

    result = corral(home, "agents", "new", "bob")

    assert result.exit_code == 0, result.output
    assert (home / "agents" / "bob" / "agent.toml").is_file()


# ------------------------------------------------------------------ infer_language


@pytest.mark.parametrize(
    ("file_name", "language"),
    [("job.py", "python"), ("job.sh", "sh"), ("job.bash", "bash"), ("job", "python")],
)
def test_the_extension_picks_the_language_when_there_is_no_shebang(
    file_name: str, language: str
) -> None:
    assert infer_language(Path(file_name), "echo hi\n") == language


@pytest.mark.parametrize(
    ("file_name", "first_line", "language"),
    [
        ("job.sh", "#!/usr/bin/env python3", "python"),
        ("job", "#!/usr/bin/python3 -u", "python"),
        ("job.py", "#!/bin/bash", "bash"),
        ("job", "#!/usr/bin/env bash", "bash"),
        ("job", "#!/bin/bash -eu", "bash"),
        ("job.py", "#!/bin/sh", "sh"),
        ("job", "#!/usr/bin/env sh", "sh"),
        ("job", "#!/bin/sh -e", "sh"),
    ],
)
def test_a_shebang_wins_over_the_extension(file_name: str, first_line: str, language: str) -> None:
    assert infer_language(Path(file_name), f"{first_line}\necho hi\n") == language


def test_an_empty_file_falls_back_to_its_extension() -> None:
    assert infer_language(Path("empty.bash"), "") == "bash"


# ------------------------------------------------------------------ the command group


def test_every_command_is_found_under_its_name() -> None:
    from corral_cli.main import COMMANDS

    context = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(context, name)
        assert isinstance(command, click.Command) and command.name == name, name
    assert main.get_command(context, "nope") is None
    assert CliRunner().invoke(main, ["nope"]).exit_code == 2


def test_a_command_imports_only_what_it_runs() -> None:
    """`corral approvals …` (typed by a person waiting) and `corral mcp` (once per
    conversation) do not pay for the Docker SDK or the MCP SDK they do not use."""
    probe = (
        "import sys; from corral_cli.main import main, COMMANDS; import click; "
        "main.get_command(click.Context(main), 'approvals'); "
        "print(sorted(m for m in ('docker', 'mcp', 'uvicorn', 'kr8s') if m in sys.modules))"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "[]"
