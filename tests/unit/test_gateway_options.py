"""`corral gateway --host/--port`: text from the command line, taken over [gateway] as the
TOML keys would be, a bad one refused naming what it allows (the config models are strict
about types: a command line's digits are still a port)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral_cli.gateway import _settings
from orchestrator.home import CorralHome


def test_a_port_given_on_the_command_line_is_taken(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path)
    assert _settings(home, None, "9031").port == 9031
    assert _settings(home, "::1", None).host == "::1"


@pytest.mark.parametrize("port", ["x", "0", "65536", "90.5"])
def test_a_bad_port_exits_2_saying_what_is_allowed(
    tmp_path: Path, port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _settings(CorralHome(root=tmp_path), None, port)
    assert exited.value.code == 2
    assert "--port: must be an integer from 1 to 65535" in capsys.readouterr().err
