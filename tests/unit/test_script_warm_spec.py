"""The warm pool's container (issue 14): the S1.2 spec of a cold run, only the command
differs; its shim runs exactly the cold command; `warm = 0` turns the pool off."""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import subprocess
from pathlib import Path

import pytest

from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.owner import Owner
from orchestrator.config import DEFAULT_SANDBOX_IMAGE, CorralConfig
from orchestrator.errors import ConfigError
from orchestrator.home import CorralHome
from orchestrator.runtime import pool_for
from sandboxes.ports import ContainerSpec
from sandboxes.script_policy import (
    SCRIPT_FILES,
    build_script_spec,
    script_command,
    warm_command,
    warm_signal,
)

MARK = "corral-exit-0123456789abcdef"

pytestmark = pytest.mark.unit


def _spec(language: str | None) -> ContainerSpec:
    return build_script_spec(
        image=DEFAULT_SANDBOX_IMAGE,
        language=language,
        workspace_dir="/srv/corral/work/warm-abc",
        user="1000:1000",
        labels={"corral.managed": "true", "corral.kind": "script"},
        tmp_size_mb=64,
        exit_mark=None if language is None else MARK,
    )


@pytest.mark.parametrize("language", sorted(SCRIPT_FILES))
def test_a_warm_container_differs_from_a_cold_one_only_in_its_command_and_open_stdin(
    language: str,
) -> None:
    cold, warm = _spec(language), _spec(None)
    # ... and the deadline a pod would carry (issue 15): a warm one's cap counts from its
    # claim, so it has none at creation.
    same = dataclasses.replace(
        warm, command=cold.command, stdin_open=False, deadline_seconds=cold.deadline_seconds
    )
    assert same == cold
    assert warm.command == warm_command() and warm.stdin_open
    assert warm.deadline_seconds is None


def _shim_runs(tmp_path: Path, line: bytes) -> subprocess.CompletedProcess[bytes]:
    """Run the shim with a stub `timeout` on PATH that prints the argv it was given."""
    stub = tmp_path / "timeout"
    stub.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@"\nif read -r rest; then echo "stdin:$rest"; fi\n'
    )
    stub.chmod(0o755)
    return subprocess.run(
        list(warm_command()),
        input=line,
        capture_output=True,
        timeout=10,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        check=False,
    )


@pytest.mark.parametrize("language", sorted(SCRIPT_FILES))
def test_the_shim_execs_exactly_the_cold_command_with_the_cap_of_the_claim_and_no_stdin(
    tmp_path: Path, language: str
) -> None:
    done = _shim_runs(tmp_path, warm_signal(language, 17, MARK) + b"more input\n")
    assert done.returncode == 0, done.stderr
    # What the stub printed is its argv: the cold command after `timeout`, cap 17, and
    # the mark the line brought. (No argv holds a newline but the script's shell's own.)
    cold = script_command(language, 17, exit_mark=MARK)[1:]
    assert done.stdout.decode() == "".join(f"{arg}\n" for arg in cold)


@pytest.mark.parametrize(
    "line",
    [
        b"perl 600 corral-exit-0123456789abcdef\n",
        b"python\n",
        b"python 6x0 corral-exit-0123456789abcdef\n",
        b"python -1 corral-exit-0123456789abcdef\n",
        b"python 600\n",  # no mark
        b"python 600 corral-exit-0123\n",
        b"python 600 corral-exit-0123456789abcdeF\n",
        b"python 600 $(id)\n",
        b"python 600 corral-exit-0123456789abcdef extra\n",
    ],
)
def test_the_shim_runs_nothing_on_a_bad_line(tmp_path: Path, line: bytes) -> None:
    done = _shim_runs(tmp_path, line)
    assert (done.returncode, done.stdout) == (125, b"")


def test_the_shim_exits_quietly_when_its_stdin_closes_unsignalled(tmp_path: Path) -> None:
    done = _shim_runs(tmp_path, b"")
    assert (done.returncode, done.stdout) == (0, b"")


def test_warm_signal_refuses_an_unknown_language() -> None:
    with pytest.raises(ValueError):
        warm_signal("perl", 600, MARK)
    with pytest.raises(ValueError):
        warm_signal("python", 600, "corral-exit-0123 python")
    assert shlex.split(warm_signal("python", 600, MARK).decode()) == ["python", "600", MARK]


@pytest.mark.parametrize(
    ("warm", "asked", "expected"), [(2, True, True), (0, True, False), (2, False, False)]
)
def test_warm_zero_or_a_one_shot_caller_opens_no_pool(
    corral_home: CorralHome, warm: int, asked: bool, expected: bool
) -> None:
    config = CorralConfig.model_validate({"container": {"sandbox": {"warm": warm}}})
    backend = DockerBackend(Owner.current(), "unix:///nonexistent.sock")
    opened = pool_for(corral_home, config, backend, warm=asked)
    assert (not isinstance(opened, contextlib.nullcontext)) is expected
    invalid = pool_for(corral_home, ConfigError("x", ["bad"]), backend, warm=True)
    assert isinstance(invalid, contextlib.nullcontext)
