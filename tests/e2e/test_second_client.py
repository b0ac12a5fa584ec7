"""An independent client (the 1.x MCP SDK, in its own venv) talks to corral: tools/list
and one execute_program call, over stdio and over Streamable HTTP."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.agents.tokens import load_or_create_token
from orchestrator.home import CorralHome
from tests.e2e.conftest import AGENT, serve_http
from tests.helpers import corral_bin, env_with_home

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
PYTHON1 = ROOT / ".venv-mcp1" / "bin" / "python"
SCRIPT = Path(__file__).with_name("mcp1_client.py")


def _run(home: CorralHome, *args: str) -> dict[str, object]:
    assert PYTHON1.exists(), "the 1.x SDK venv is missing: run `make test`"
    done = subprocess.run(
        [str(PYTHON1), str(SCRIPT), *args],
        env=env_with_home(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _check(out: dict[str, object]) -> None:
    assert out["list_changed"] is True
    assert out["tools"] == ["execute_program"]
    assert out["is_error"] is False
    assert str(out["text"]).startswith("42\n")
    structured = out["structured"]
    assert isinstance(structured, dict) and structured["exit_code"] == 0


async def test_the_1x_sdk_client_over_stdio(agent_home: CorralHome) -> None:
    _check(_run(agent_home, "stdio", corral_bin(), "mcp", "--agent", AGENT))


async def test_the_1x_sdk_client_over_http(agent_home: CorralHome) -> None:
    async with serve_http(agent_home) as (url, _pid):
        _check(_run(agent_home, "http", url, load_or_create_token(agent_home, AGENT)))
