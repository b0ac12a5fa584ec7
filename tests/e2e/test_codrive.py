"""SPEC S3 end to end: a real MCP client -> corral mcp -> the gateway -> the agent's desktop
rig (Xvfb, openbox, AT-SPI, the real galculator). Each rung is proven by a step whose
earlier rungs fail in a known way; approvals are decided with the real CLI; a person acts
through the console's live-view WebSocket (RFB over the gateway's bridge).

One gateway and one desktop rig serve the whole module (a desktop takes seconds to
start); each test leaves the calculator cleared and the seat with the AI."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import docker
import mcp_types as types
import pytest

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from sandboxes.fence import unfence
from tests.e2e.conftest import McpHarness, connect, wait_until
from tests.e2e.gateways import add_operator, operator_env, running_gateway
from tests.e2e.person import console_login, live_view
from tests.helpers import corral_bin, leaked_containers
from tests.images import ENV

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

APPROVAL_SECONDS = 8
CONFIG = (
    f"[approvals]\ntimeout_seconds = {APPROVAL_SECONDS}\n\n"
    "[codrive]\nhandoff_timeout_seconds = 60\n"
)
CALC = "galculator"


def button(name: str, **more: Any) -> dict[str, Any]:
    return {"action": "click", "role": "button", "name": name, **more}


CLEAR = button("AC")
READ = {"action": "click", "api_action": "read", "params": {"role": "text"}}


@dataclass
class Desk:
    home: CorralHome
    base: str
    token: str


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def docker_module() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
async def desk(
    tmp_path_factory: pytest.TempPathFactory, docker_module: docker.DockerClient
) -> AsyncIterator[Desk]:
    home = CorralHome(root=tmp_path_factory.mktemp("codrive") / "home", env=ENV)
    home.ensure()
    write_alice(home)
    token = add_operator(home, "olga")
    async with running_gateway(home, CONFIG) as (base, pid):
        yield Desk(home, base, token)
    # The stopped gateway removed everything it started (rigs, proxies, pool containers).
    owned = {"label": [f"corral.owner.pid={pid}"]}
    assert docker_module.containers.list(all=True, ignore_removed=True, filters=owned) == []
    assert leaked_containers(docker_module) == []


def write_alice(home: CorralHome, deny_list: list[str] | None = None) -> None:
    text = render_new_agent("alice").replace("codrive = false", "codrive = true")
    text = text.replace("desktop_use = false", "desktop_use = true")
    if deny_list is not None:
        text = text.replace(
            "[capabilities.computer_use_config]\n",
            f"[capabilities.computer_use_config]\ndeny_list = {json.dumps(deny_list)}\n",
            1,
        )
    path = home.agent_file("alice")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def corral(home: CorralHome, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [corral_bin(), *args],
        env=operator_env(home, "olga"),
        capture_output=True,
        text=True,
        timeout=60,
    )


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def run(mcp: McpHarness, steps: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    result = await mcp.client.call_tool("codrive_run", {"target_app": CALC, "steps": steps, **more})
    data = dict(result.structured_content or {})
    data["text"] = text_of(result)
    return data


async def status(mcp: McpHarness) -> dict[str, Any]:
    result = await mcp.client.call_tool("codrive_status", {})
    return dict(result.structured_content or {})


def value(data: dict[str, Any], index: int) -> str:
    """What step `index` read; the text block carries it inside an untrusted-data fence."""
    found: str = data["steps"][index]["value"]
    text = data["text"]
    start = text.rindex("The text between", 0, text.index(f"what step {index} read"))
    end = text.index("END>>>", start) + len("END>>>")
    assert unfence(text[start:end])[1] == found
    return found


async def test_seven_times_six_by_each_rung(desk: Desk) -> None:
    async with connect(desk.home, "stdio", agent="alice") as mcp:
        assert {"codrive_run", "codrive_status"} <= await mcp.tool_names()
        done = await run(
            mcp,
            [
                CLEAR,
                button("7", api_action="no_such_action"),  # api fails: locate, exact
                button("\u00d7"),  # a times sign; galculator names it "*": locate, fuzzy
                button("6", api_action="press", params={"name": "6", "role": "button"}),
                button("="),
                READ,
            ],
        )
        assert done.get("state") == "finished", done
        steps = done["steps"]
        assert steps[1]["rung"] == "locate" and "not registered" in steps[1]["fell_through"][0]
        assert "(exact)" in steps[1]["outcome"] and steps[1]["effect"] == "changed"
        assert steps[2]["rung"] == "locate" and "(fuzzy)" in steps[2]["outcome"]
        assert (steps[3]["rung"], steps[3]["effect"]) == ("api_action", "confirmed")
        assert steps[5]["rung"] == "api_action" and value(done, 5) == "42"

        # x/y last: a name that is not there falls through to the coordinates of "7".
        seven = steps[1]["at"]
        again = await run(
            mcp,
            [CLEAR, button("no such key", x=seven[0], y=seven[1]), READ, button("AC")],
        )
        assert again["state"] == "finished", again["text"]
        assert again["steps"][1]["rung"] == "xy"
        assert "not found" in again["steps"][1]["fell_through"][0]
        assert value(again, 2) == "7"

        # A click on the calculator's blank status label changes nothing (the second one:
        # the first moves the pointer off a button, which repaints it): said, not hidden.
        blank = {"action": "click", "role": "label", "name": " "}
        quiet = await run(mcp, [blank, blank], watch_mode=True)
        assert quiet["steps"][1]["effect"] == "no_visible_effect", quiet["text"]
        assert "idle after" in quiet["steps"][1]["outcome"]


async def test_invalid_steps_and_the_deny_list(desk: Desk) -> None:
    async with connect(desk.home, "stdio", agent="alice") as mcp:
        bad = await mcp.client.call_tool(
            "codrive_run",
            {
                "target_app": CALC,
                "steps": [CLEAR, {"action": "type", "category": "credential", "text": "hunter2"}],
            },
        )
        assert bad.is_error and "steps.1" in text_of(bad) and "credential" in text_of(bad)
        assert "hunter2" not in text_of(bad)
        unknown = await mcp.client.call_tool(
            "codrive_run", {"target_app": "excel", "steps": [CLEAR]}
        )
        assert unknown.is_error and "galculator" in text_of(unknown)

        write_alice(desk.home, deny_list=["galculator"])
        try:
            refused = await run(mcp, [button("7")])
        finally:
            write_alice(desk.home)
        assert refused["state"] == "failed" and "deny list" in refused["reason"]
        assert refused["steps"] == []


async def decided(desk: Desk, mcp: McpHarness, verdict: list[str]) -> dict[str, Any]:
    """A run whose second step is consequential; the CLI decides it (or nobody does)."""
    out: dict[str, Any] = {}

    async def go() -> None:
        out.update(
            await run(mcp, [CLEAR, button("7", category="submit", description="enter the seven")])
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        if verdict:

            async def raised() -> list[dict[str, Any]]:
                listed = json.loads(corral(desk.home, "approvals", "list", "--json").stdout)
                return [a for a in listed if a["state"] == "pending"]

            (approval,) = await wait_until(raised, limit=30)
            assert approval["tool"] == "codrive_run" and "enter the seven" in approval["step"]
            assert approval["category"] == "submit"
            done = corral(desk.home, "approvals", *verdict, approval["id"])
            assert done.returncode == 0, done.stderr
    return out


async def test_consequential_steps_wait_for_an_operator(desk: Desk) -> None:
    async with connect(desk.home, "stdio", agent="alice") as mcp:
        approved = await decided(desk, mcp, ["approve"])
        assert approved["state"] == "finished", approved["text"]
        assert approved["steps"][1]["rung"] == "locate"

        denied = await decided(desk, mcp, ["deny", "--reason", "not now"])
        assert denied["state"] == "stopped" and "denied" in denied["reason"]
        assert len(denied["steps"]) == 1  # no rung ran for the denied step

        expired = await decided(desk, mcp, [])
        assert expired["state"] == "stopped" and "expired" in expired["reason"]
    decisions = [
        e["details"]["decision"]
        for e in map(json.loads, desk.home.audit_file.read_text().splitlines())
        if e["event"] == "approval_decided"
    ]
    assert decisions[-3:] == ["approved", "denied", "expired"]


async def rig_key(desk: Desk, client: Any) -> dict[str, Any]:
    """Alice's desktop rig as the console lists it ({} before it started)."""
    state = (await client.get("/console/api/state")).json()
    rows = [s for s in state["sessions"] if s["owner"] == "alice" and "desktop" in s["kind"]]
    assert len(rows) <= 1, rows
    return dict(rows[0]) if rows else {}


async def test_a_credential_step_goes_to_a_person_and_resumes_after_hand_back(
    desk: Desk,
) -> None:
    async with (
        console_login(desk.base, desk.token) as console,
        connect(desk.home, "stdio", agent="alice") as mcp,
    ):
        out: dict[str, Any] = {}

        async def go() -> None:
            out.update(
                await run(
                    mcp,
                    [
                        CLEAR,
                        {"action": "take_over", "description": "log in to the payroll site"},
                        button("7"),
                        READ,
                    ],
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(go)

            async def asked() -> dict[str, Any] | None:
                row = await rig_key(desk, console)
                return row if row.get("needs_person") else None

            row = await wait_until(asked, limit=30)
            assert row["state"] == "a person is needed: log in to the payroll site"
            async with live_view(desk.base, console, row["agent"]) as person:
                await person.press()  # a person's key takes the seat in the bridge

                async def taken() -> bool:
                    return (await rig_key(desk, console))["controller"] == "human"

                await wait_until(taken, limit=10)
                assert (await status(mcp))["state"] == "human"
                # The person holds the desktop: the AI's own input is refused, its
                # screenshots still work.
                click = await mcp.client.call_tool(
                    "computer_use", {"verb": "click", "x": 5, "y": 5}
                )
                assert click.is_error and "person has the desktop" in text_of(click)
                shot = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
                assert not shot.is_error, text_of(shot)
                done = corral(desk.home, "sessions", "handback", row["agent"])
                assert done.returncode == 0, done.stderr
        assert out["state"] == "finished", out["text"]
        assert out["steps"][1]["outcome"] == "a person did this step"
        assert value(out, 3) == "7"
        # The console's timeline of the desktop has the steps, the take over and hand back.
        state = (await console.get("/console/api/state", params={"agent": row["agent"]})).json()
        tools = [e["tool"] for e in state["timeline"]]
        assert "codrive_run" in tools and "takeover" in tools and "handback" in tools


async def test_a_step_a_person_interrupts_is_retried_once_then_the_run_stops(
    desk: Desk,
) -> None:
    def drops() -> list[dict[str, Any]]:
        lines = desk.home.audit_file.read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["event"] == "codrive_step_dropped"]

    async with (
        console_login(desk.base, desk.token) as console,
        connect(desk.home, "stdio", agent="alice") as mcp,
    ):
        assert (await run(mcp, [CLEAR]))["state"] == "finished"  # the rig runs
        key = (await rig_key(desk, console))["agent"]

        async def interrupt(times: int, steps: list[dict[str, Any]]) -> dict[str, Any]:
            out: dict[str, Any] = {}

            async def go() -> None:
                out.update(await run(mcp, steps))

            dropped_before = len(drops())
            async with anyio.create_task_group() as tg, live_view(desk.base, console, key) as p:
                tg.start_soon(go)
                for round_ in range(times):

                    async def waiting(round_: int = round_) -> bool:
                        # Round k presses during try k of step 1: the run must have dropped
                        # the k-1 tries before (it may not have noticed a hand back's
                        # interruption yet when the status already says "running").
                        if len(drops()) - dropped_before != round_:
                            return False
                        now = await status(mcp)
                        return now.get("state") == "running" and now.get("current_step") == 1

                    await wait_until(waiting, limit=20)
                    await p.press()  # the wait step in flight is dropped

                    async def taken() -> bool:
                        return (await rig_key(desk, console))["controller"] == "human"

                    await wait_until(taken, limit=10)
                    done = corral(desk.home, "sessions", "handback", key)
                    assert done.returncode == 0, done.stderr
            return out

        # The wait step is the one interrupted: 8 s leave room to see it start and press a
        # key on a loaded machine (4 s were once too few with the other test folder beside).
        once = await interrupt(1, [CLEAR, {"action": "wait", "amount": 8}, button("7"), READ])
        assert once["state"] == "finished", once["text"]
        assert once["steps"][1].get("retried") is True and value(once, 3) == "7"

        twice = await interrupt(2, [CLEAR, {"action": "wait", "amount": 8}, button("7")])
        assert twice["state"] == "failed" and "interrupted by a person twice" in twice["reason"]
