"""The MCP front (`corral mcp`, one per conversation) killed with SIGKILL mid-call: what
its call started ends, and the audit says so.

- a click held for an operator: the gateway sees the front's connection close, the held
  call is cancelled and its approval withdrawn (audited as cancelled, with the reason),
  so no operator answers a question nobody asks; the page never gets the click;
- a script running in the front's own sandbox: the front's watchdog removes its
  container and audits `container_reaped` for the script's session."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from orchestrator.people.approvals import WITHDRAWN
from tests.e2e.conftest import McpHarness, connect
from tests.e2e.test_activation_rules import open_page
from tests.e2e.test_computer_use import SITE, World, call, write_agent
from tests.e2e.test_computer_use import sites as sites
from tests.e2e.test_operators import kiosk_gateway, pending
from tests.faults import write_default_agent
from tests.helpers import wait_until
from tests.sites import requests_seen

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DELETE_DRAFT = {"x": 200, "y": 140}  # the held button's middle on /bound


@pytest.fixture
async def world(corral_home: CorralHome, sites: tuple[str, str, str]) -> AsyncIterator[World]:
    async with kiosk_gateway(corral_home, sites, 120) as running:
        yield running


def front_pid(home: CorralHome, agent: str) -> int:
    """The `corral mcp --agent AGENT` process serving this home (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            ours = f"CORRAL_HOME={home.root}".encode() in environ
            if ours and b"mcp" in argv and agent.encode() in argv:
                found.append(int(entry.name))
    assert len(found) == 1, found
    return found[0]


def processes() -> list[tuple[int, list[bytes]]]:
    """(pid, argv) of every process, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                found.append((int(entry.name), (entry / "cmdline").read_bytes().split(b"\0")))
    return found


def events_of(home: CorralHome, agent: str) -> list[dict[str, Any]]:
    return [e for e in AuditLog(home.audit_file).read() if e.get("agent") == agent]


@dataclass
class Front:
    mcp: McpHarness
    agent: str
    killed: bool = False


@contextlib.asynccontextmanager
async def front(home: CorralHome, agent: str) -> AsyncIterator[Front]:
    """A stdio MCP client of its own `corral mcp`; once `kill_mid_call` killed that
    front, what leaving its dead connection raises is expected (and only then)."""
    ours: Front | None = None
    try:
        async with connect(home, "stdio", agent=agent) as mcp:
            ours = Front(mcp, agent)
            yield ours
    except Exception:
        if ours is None or not ours.killed:
            raise


async def kill_mid_call(
    front: Front, act: Callable[[], Awaitable[Any]], in_flight: Callable[[], Any]
) -> int:
    """Run `act`; once `in_flight()` holds, SIGKILL the front (its pid is returned). The
    call itself never gets an answer (its front is gone): it is cancelled then."""
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            with contextlib.suppress(Exception):  # the connection closes under it
                await act()

        tg.start_soon(run)
        await wait_until(in_flight, limit=60)
        pid = front_pid(front.mcp.home, front.agent)
        front.killed = True
        os.kill(pid, signal.SIGKILL)
        tg.cancel_scope.cancel()
    return pid


async def test_a_killed_front_withdraws_its_held_approval_and_the_click_never_lands(
    world: World, docker_client: docker.DockerClient, sites: tuple[str, str, str]
) -> None:
    home, site_ip, agent = world.home, sites[1], "fk-front"
    write_agent(home, agent, allowed_domains=[SITE], confirm_words=["delete"], confirm_urls=[])
    async with front(home, agent) as ours:
        mcp = ours.mcp
        assert not (await call(mcp, "computer_session_start")).is_error
        await open_page(mcp, "/bound")
        await kill_mid_call(
            ours,
            lambda: call(mcp, "computer_click", **DELETE_DRAFT),
            lambda: [a for a in pending(home) if a["agent"] == agent],
        )

    def withdrawn() -> list[dict[str, Any]]:
        return [
            e
            for e in events_of(home, agent)
            if e["event"] == "approval_decided" and e["details"]["decision"] == "cancelled"
        ]

    (decided,) = await wait_until(withdrawn, limit=30)
    assert decided["details"]["reason"] == WITHDRAWN and decided["details"]["operator"] is None
    assert [a for a in pending(home) if a["agent"] == agent] == []
    assert not [p for p in requests_seen(docker_client, site_ip) if "/bound-deleted" in p]


async def test_a_killed_front_leaves_no_script_container_and_the_audit_names_it(
    corral_home: CorralHome, docker_client: docker.DockerClient
) -> None:
    agent = "fk-script"
    write_default_agent(corral_home, agent)
    labels: dict[str, str | list[str] | bool] = {
        "label": [f"corral.agent={agent}", "corral.kind=script"]
    }

    def running() -> list[Any]:
        return docker_client.containers.list(
            ignore_removed=True, filters={**labels, "status": "running"}
        )

    code = "import time\nwhile True: time.sleep(1)"  # the work in flight, not a wait
    async with front(corral_home, agent) as ours:
        pid = await kill_mid_call(
            ours,
            lambda: ours.mcp.client.call_tool(
                "execute_program", {"code": code, "timeout_seconds": 120}
            ),
            running,
        )

    def reaped_lines() -> list[dict[str, Any]]:
        return [e for e in events_of(corral_home, agent) if e["event"] == "container_reaped"]

    owned = {"label": f"corral.owner.pid={pid}"}

    def left() -> bool:  # the script's container and any other the front started (its pool's)
        return not docker_client.containers.list(all=True, ignore_removed=True, filters=owned)

    def found() -> list[tuple[Any, ...]]:  # which of the front's containers, in what state
        return [
            (c.name, c.status, c.labels.get("corral.kind"), c.attrs.get("Created"),
             c.attrs.get("State", {}).get("StartedAt"))
            for c in docker_client.containers.list(ignore_removed=True, all=True, filters=owned)
        ]  # fmt: skip

    def watchdogs() -> list[list[bytes]]:
        return [a for _, a in processes() if b"orchestrator.backends.docker.watchdog" in a]

    await wait_until(
        reaped_lines,
        limit=30,
        explain=lambda: (
            f"no container_reaped; watchdogs: {watchdogs()}; the front's "
            f"containers: {found()}; audit: {events_of(corral_home, agent)}"
        ),
    )
    await wait_until(
        left,
        limit=30,
        explain=lambda: (
            f"the front's containers outlived it: {found()}; audit: {events_of(corral_home, agent)}"
        ),
    )
    events = events_of(corral_home, agent)
    (started,) = [e for e in events if e["event"] == "script_started"]
    session = started["details"]["session"]
    reaped = [e for e in events if e["event"] == "container_reaped"]
    assert [e["details"]["session"] for e in reaped] == [session], events
    assert reaped[0]["details"]["kind"] == "script"
    assert "owner process ended" in reaped[0]["details"]["why"]
    assert not [e for e in events if e["event"] == "script_executed"]
