"""The gateway killed with SIGKILL with an approval pending, a codrive run mid-step and a
take over in progress: after its restart the approval is withdrawn (never approved), the
run is reported failed with the reason, the seat is free, every container is gone, and
the audit closes each, marked `recovered` (orchestrator.ledger)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import docker
import pytest

from orchestrator.audit import AuditLog
from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, wait_until
from tests.e2e.gateways import add_operator, running_gateway
from tests.e2e.test_codrive import CALC, CLEAR, SAFETY, button, corral, status, write_alice
from tests.images import ENV

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# Nothing expires on its own while the test runs: what closes the work is the restart.
CONFIG = "[approvals]\ntimeout_seconds = 600\n\n[codrive]\nhandoff_timeout_seconds = 600\n"


def events(home: CorralHome, name: str) -> list[dict[str, Any]]:
    return [e for e in AuditLog(home.audit_file).read() if e["event"] == name]


def write_bob(home: CorralHome) -> None:
    """An agent with a kiosk session (no network), whose seat a person takes over."""
    text = render_new_agent("bob").replace("computer_use = false", "computer_use = true")
    path = home.agent_file("bob")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def owned_by(client: docker.DockerClient, pid: int) -> list[Any]:
    owned = {"label": [f"corral.owner.pid={pid}"]}
    return list(client.containers.list(all=True, ignore_removed=True, filters=owned))


@asynccontextmanager
async def work_in_flight(home: CorralHome) -> AsyncIterator[str]:
    """Under the running gateway: bob's kiosk taken over by operator olga, and alice's
    codrive run held at its second step for an approval; yields the run's id. Alice's
    conversation stays open meanwhile: a run is on its conversation's desktop rig, which
    ends with the conversation (issue 25), and the work must be in flight when the
    gateway is killed."""
    async with connect(home, "stdio", agent="bob") as bob:
        started = await bob.client.call_tool("computer_session_start", {})
        assert not started.is_error, started.content
    done = await corral(home, "sessions", "takeover", "bob")
    assert done.returncode == 0, done.stderr
    assert events(home, "takeover"), "the take over is audited before the CLI answers"

    async with connect(home, "stdio", agent="alice") as alice:
        steps = [CLEAR, button("7", category="submit", description="enter the seven")]
        async with anyio.create_task_group() as tg:

            async def held() -> None:
                # Left waiting until the gateway is killed under it (not cancelled: a
                # client's cancel would withdraw the approval before the kill).
                with contextlib.suppress(Exception):
                    await alice.client.call_tool(
                        "codrive_run", {"target_app": CALC, "steps": steps}
                    )

            tg.start_soon(held)
            await wait_until(lambda: events(home, "approval_raised"), limit=SAFETY)
            # The ledger is written just after the audit line: the kill must find both.
            await wait_until(lambda: "approval:" in ledgers(home), limit=SAFETY)
            (run,) = events(home, "codrive_run_started")
            yield str(run["details"]["run"])
            tg.cancel_scope.cancel()


def ledgers(home: CorralHome) -> str:
    """The text of every ledger of work in flight (orchestrator.ledger)."""
    texts = []
    for path in home.inflight_dir.glob("*.json"):
        with contextlib.suppress(FileNotFoundError):
            texts.append(path.read_text())
    return "".join(texts)


async def test_a_killed_gateways_work_in_flight_is_closed_at_its_restart(
    tmp_path: Any, docker_client: docker.DockerClient
) -> None:
    home = CorralHome(root=tmp_path / "home", env=ENV)
    home.ensure()
    write_alice(home)
    write_bob(home)
    add_operator(home, "olga")
    async with running_gateway(home, CONFIG) as (_, pid), work_in_flight(home) as run_id:
        (approval,) = events(home, "approval_raised")
        assert events(home, "approval_decided") == []
        os.kill(pid, signal.SIGKILL)
        # its owner watchdog removes every container it had (a desktop rig, a kiosk)
        await wait_until(lambda: owned_by(docker_client, pid) == [], limit=SAFETY)

    async with running_gateway(home, CONFIG):
        recovered = [e for e in AuditLog(home.audit_file).read() if e["details"].get("recovered")]
        by_event = {e["event"]: e for e in recovered}
        assert sorted(by_event) == sorted(
            [
                "approval_decided",
                "codrive_run_ended",
                "takeover_ended",
                "rig_ended",
                "computer_session_ended",
            ]
        ), recovered
        assert len(recovered) == 5  # each closed once
        decided = by_event["approval_decided"]["details"]
        assert decided["approval"] == approval["details"]["approval"]
        assert decided["decision"] == "cancelled" and decided["operator"] is None
        ended = by_event["codrive_run_ended"]["details"]
        assert (ended["run"], ended["state"]) == (run_id, "failed")
        assert by_event["takeover_ended"]["details"]["operator"] == "olga"

        async with connect(home, "stdio", agent="alice") as alice:
            found = await status(alice, run_id)
        assert found["state"] == "failed", found
        assert "the gateway stopped" in found["reason"] and "start it again" in found["reason"]

        listed = await corral(home, "approvals", "list", "--json")
        assert [a for a in json.loads(listed.stdout) if a["state"] == "pending"] == []
        seats = await corral(home, "sessions", "list", "--json")
        assert json.loads(seats.stdout) == []  # the seat is free: nothing holds it
    assert list(home.inflight_dir.glob("*.json")) == []  # the stopped one removed its own
