"""SPEC S6 end to end, without a console: a real MCP client's held call, answered by an
operator through `corral approvals` (loopback to a real gateway, with the operator's
token), denied at the
timeout when nobody answers; `corral sessions` takes the desktop over and hands it back.
Kiosk and proxy containers are real; the site is a local HTTPS container."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, free_port, wait_until
from tests.e2e.gateways import operator_env, running_gateway
from tests.e2e.test_computer_use import (
    RED,
    SITE,
    World,
    call,
    image_of,
    kiosk_config,
    screen_until,
    sites,  # noqa: F401 (the module-scoped site containers, shared by name)
    text_of,
    write_agent,
)
from tests.helpers import corral_bin, env_with_home
from tests.images import ENV

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TIMEOUT = 10  # [approvals] timeout_seconds in this world


def corral(
    home: CorralHome, *args: str, operator: str | None = "olga", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`corral ARGS` as `operator` (its token in CORRAL_OPERATOR_TOKEN; None: no token),
    or with exactly `env`."""
    if env is None:
        env = env_with_home(home) if operator is None else operator_env(home, operator)
    return subprocess.run(
        [corral_bin(), *args], env=env, capture_output=True, text=True, timeout=60
    )


def pending(home: CorralHome) -> list[dict[str, Any]]:
    done = corral(home, "approvals", "list", "--json")
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


@asynccontextmanager
async def kiosk_gateway(
    home: CorralHome, site_info: tuple[str, str, str], approvals_timeout: int
) -> AsyncIterator[World]:
    """A real `corral gateway` whose kiosks reach the test sites, with this approval
    timeout; stopped (every session removed) on exit."""
    async with running_gateway(home, kiosk_config(site_info, approvals_timeout)) as (_, pid):
        yield World(home, pid)


def gateway_port(home: CorralHome) -> int:
    return int(home.config_file.read_text().split("port = ")[1].split()[0])


@pytest.fixture
async def world(corral_home: CorralHome, sites: tuple[str, str, str]) -> AsyncIterator[World]:  # noqa: F811
    async with kiosk_gateway(corral_home, sites, TIMEOUT) as running:
        yield running


def audit(home: CorralHome, event: str) -> list[dict[str, Any]]:
    lines = home.audit_file.read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == event]


async def test_a_held_navigation_waits_for_the_cli_approve_deny_or_timeout(world: World) -> None:
    home = world.home
    write_agent(
        home,
        "olive",
        allowed_domains=[SITE],
        confirm_urls=[f"https://{SITE}/login"],
        confirm_words=[],
    )
    async with connect(home, "stdio", agent="olive") as mcp:
        started = await call(mcp, "computer_session_start")
        assert not started.is_error, text_of(started)
        assert f"https://{SITE}/login" in text_of(started) and f"{TIMEOUT} s" in text_of(started)
        rules = started.structured_content["approval_rules"]  # type: ignore[index]
        assert rules["timeout_seconds"] == TIMEOUT

        async def held(decide: list[str]) -> Any:
            """Navigate to the held page; while the call waits, decide it with the CLI."""
            results: list[Any] = []

            async def navigate() -> None:
                results.append(await call(mcp, "computer_navigate", url=f"https://{SITE}/login"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(navigate)
                if decide:
                    found: list[dict[str, Any]] = []

                    async def raised() -> bool:
                        found[:] = [a for a in pending(home) if a["agent"] == "olive"]
                        return bool(found)

                    await wait_until(raised, limit=TIMEOUT)
                    (approval,) = found
                    assert approval["category"] == "other" and approval["state"] == "pending"
                    assert approval["expires_at"] > approval["created_at"]
                    done = corral(home, "approvals", *decide, approval["id"])
                    assert done.returncode == 0, done.stderr
            return results[0]

        approved = await held(["approve"])
        assert not approved.is_error, text_of(approved)
        await screen_until(mcp, lambda r, img: img.getpixel((50, 50)) == RED)

        denied = await held(["deny", "--reason", "not today"])
        assert denied.is_error and "denied this action" in text_of(denied)
        assert "confirm_urls" in text_of(denied) and "not today" in text_of(denied)

        expired = await held([])  # nobody answers
        assert expired.is_error and f"within {TIMEOUT} s" in text_of(expired)
        await call(mcp, "computer_session_stop")

    decisions = [e["details"] for e in audit(home, "approval_decided")]
    assert [d["decision"] for d in decisions] == ["approved", "denied", "expired"]
    assert decisions[0]["operator"] == "olga" and decisions[2]["operator"] is None
    assert decisions[1]["reason"] == "not today"
    assert all(isinstance(d["latency_ms"], int) for d in decisions)


async def test_takeover_freezes_the_ai_and_handback_releases_it(world: World) -> None:
    home = world.home
    write_agent(home, "tom", allowed_domains=[SITE], confirm_words=[])
    async with connect(home, "stdio", agent="tom") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        listed = json.loads(corral(home, "sessions", "list", "--json").stdout)
        assert [(s["agent"], s["state"]) for s in listed] == [("tom", "AI")]

        done = corral(home, "sessions", "takeover", "tom")
        assert done.returncode == 0, done.stderr
        refused = await call(mcp, "computer_click", x=10, y=10)
        assert refused.is_error and "person has the desktop" in text_of(refused)
        shot = await call(mcp, "computer_screenshot")  # screenshots still work
        assert not shot.is_error and image_of(shot).size == (1280, 800)
        listed = json.loads(corral(home, "sessions", "list", "--json").stdout)
        assert listed[0]["state"] == "human (olga)"

        again = corral(home, "sessions", "takeover", "tom", operator="pete")
        assert again.returncode == 1 and "olga has the desktop" in again.stderr

        assert corral(home, "sessions", "handback", "tom").returncode == 0
        clicked = await call(mcp, "computer_click", x=10, y=10)
        assert not clicked.is_error, text_of(clicked)

        assert corral(home, "sessions", "stop", "tom").returncode == 0
        gone = await call(mcp, "computer_screenshot")
        assert gone.is_error and "stopped by operator" in text_of(gone)
    kinds = [e["event"] for e in map(json.loads, home.audit_file.read_text().splitlines())]
    assert "takeover" in kinds and "handback" in kinds


async def test_the_cli_needs_the_gateway_and_an_operators_token(
    world: World, tmp_path: Any
) -> None:
    other = CorralHome(tmp_path / "elsewhere", env=ENV)
    other.root.mkdir()
    done = corral(other, "approvals", "list", operator=None)
    assert done.returncode == 2 and "CORRAL_OPERATOR_TOKEN" in done.stderr
    other.config_file.write_text(f"[gateway]\nport = {free_port()}\n")
    done = corral(other, "approvals", "list")
    assert done.returncode == 1 and "not answering" in done.stderr
    # The right port but another home's operator: the gateway knows no such token.
    other.config_file.write_text(f"[gateway]\nport = {gateway_port(world.home)}\n")
    done = corral(other, "approvals", "list")
    assert done.returncode == 1 and "not an operator's token" in done.stderr
