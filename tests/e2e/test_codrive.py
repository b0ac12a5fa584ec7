"""SPEC S3 end to end: a real MCP client -> corral mcp -> the gateway -> the agent's desktop
rig (Xvfb, openbox, AT-SPI, the real galculator). Each rung is proven by a step whose
earlier rungs fail in a known way; approvals are decided with the real CLI; a person acts
through the console's live-view WebSocket (RFB over the gateway's bridge).

One gateway and one desktop rig serve the whole module (a desktop takes seconds to
start); each test leaves the calculator cleared and the seat with the AI.

Every wait here is on an event the product emits (a run's state and try in
`codrive_status`, an audit line, the console's seat); the time limits are safety nets
only. The product's own clocks (an approval's expiry, the hand-back timeout) are set
well above what a loaded machine needs to answer them."""

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

# An approval expires after this: the approve and deny cases decide well within it
# (two CLI calls, seconds each on a loaded machine); the expired case waits it out.
APPROVAL_SECONDS = 20
CONFIG = (
    f"[approvals]\ntimeout_seconds = {APPROVAL_SECONDS}\n\n"
    "[codrive]\nhandoff_timeout_seconds = 300\n"
)
CALC = "galculator"
SAFETY = 120.0  # the outer bound of any wait for an event: reached only when it never comes
GOING = ("running", "waiting_approval", "human")  # a run's states before it ends


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


async def corral(home: CorralHome, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, run without blocking the test's event loop (the live view's socket
    and a run's call stay served while it starts)."""
    with anyio.fail_after(SAFETY):
        done = await anyio.run_process(
            [corral_bin(), *args], env=operator_env(home, "olga"), check=False
        )
    out, err = done.stdout.decode(), done.stderr.decode()
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def audit_events(home: CorralHome, event: str) -> list[dict[str, Any]]:
    if not home.audit_file.exists():  # nothing audited yet
        return []
    lines = home.audit_file.read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == event]


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def answer_of(result: types.CallToolResult) -> dict[str, Any]:
    data = dict(result.structured_content or {})
    data["text"] = text_of(result)
    return data


async def run(mcp: McpHarness, steps: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    """A run, followed to its end: codrive_run answers once the run waits for a person, or
    after 30 s with it still going (a loaded machine), then codrive_status follows it."""
    args = {"target_app": CALC, "steps": steps, **more}
    data = answer_of(await mcp.client.call_tool("codrive_run", args))
    if data.get("state") not in GOING:
        return data

    async def ended() -> dict[str, Any] | None:
        now = await status(mcp, data["run_id"])
        return now if now.get("state") not in GOING else None

    found: dict[str, Any] = await wait_until(ended, limit=SAFETY)
    return found


async def status(mcp: McpHarness, run_id: str | None = None) -> dict[str, Any]:
    args = {} if run_id is None else {"run_id": run_id}
    return answer_of(await mcp.client.call_tool("codrive_status", args))


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
            # The raise is seen in the audit log (an event, no CLI per poll); the CLI then
            # lists and decides it, well within its APPROVAL_SECONDS.
            before = len(audit_events(desk.home, "approval_raised"))

            def raised() -> bool:
                return len(audit_events(desk.home, "approval_raised")) > before

            await wait_until(raised, limit=SAFETY)
            listed = json.loads((await corral(desk.home, "approvals", "list", "--json")).stdout)
            (approval,) = [a for a in listed if a["state"] == "pending"]
            # What corral read of the step, the agent's own words beside it, labelled.
            assert approval["tool"] == "codrive_run" and "button '7'" in approval["step"]
            assert "(the agent says: “enter the seven”)" in approval["description"]
            assert approval["category"] == "submit"
            done = await corral(desk.home, "approvals", *verdict, approval["id"])
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

            row = await wait_until(asked, limit=SAFETY)
            assert row["state"] == "a person is needed: log in to the payroll site"
            async with live_view(desk.base, console, row["agent"]) as person:
                await person.press()  # a person's key takes the seat in the bridge

                async def taken() -> bool:
                    return (await rig_key(desk, console))["controller"] == "human"

                await wait_until(taken, limit=SAFETY)
                assert (await status(mcp))["state"] == "human"
                # The person holds the desktop: the AI's own input is refused, its
                # screenshots still work.
                click = await mcp.client.call_tool(
                    "computer_use", {"verb": "click", "x": 5, "y": 5}
                )
                assert click.is_error and "person has the desktop" in text_of(click)
                shot = await mcp.client.call_tool("computer_use", {"verb": "screenshot"})
                assert not shot.is_error, text_of(shot)
                done = await corral(desk.home, "sessions", "handback", row["agent"])
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
    async with (
        console_login(desk.base, desk.token) as console,
        connect(desk.home, "stdio", agent="alice") as mcp,
    ):
        assert (await run(mcp, [CLEAR]))["state"] == "finished"  # the rig runs
        key = (await rig_key(desk, console))["agent"]

        async def taken() -> bool:
            return (await rig_key(desk, console))["controller"] == "human"

        async def interrupt(times: int, steps: list[dict[str, Any]]) -> dict[str, Any]:
            """A person presses a key during try 1, ..., `times` of step 1 (a wait step)."""
            out: dict[str, Any] = {}

            async def go() -> None:
                out.update(await run(mcp, steps))

            async with anyio.create_task_group() as tg, live_view(desk.base, console, key) as p:
                tg.start_soon(go)
                for attempt in range(1, times + 1):

                    async def in_flight(attempt: int = attempt) -> bool:
                        # Not "running step 1" alone: that holds while the step is still
                        # checked against the deny list, when a key would only make the try
                        # wait for the hand back, and after a hand back before the run
                        # noticed the interruption. current_try names the try in flight.
                        now = await status(mcp)
                        seen = [now.get(k) for k in ("state", "current_step", "current_try")]
                        return seen == ["running", 1, attempt]

                    await wait_until(in_flight, limit=SAFETY)
                    await p.press()  # the wait step in flight is dropped
                    await wait_until(taken, limit=SAFETY)
                    done = await corral(desk.home, "sessions", "handback", key)
                    assert done.returncode == 0, done.stderr
            dropped = [
                e["details"]["try"]
                for e in audit_events(desk.home, "codrive_step_dropped")
                if e["details"]["run"] == out["run_id"]
            ]
            assert dropped == list(range(1, times + 1)), dropped
            return out

        # The wait is the window in which the key must land once its try is seen in flight
        # (a status call and a key over the open live view); the retry of `once` runs it
        # whole, the two tries of `twice` are both cut short.
        once = await interrupt(1, [CLEAR, {"action": "wait", "amount": 20}, button("7"), READ])
        assert once["state"] == "finished", once["text"]
        assert once["steps"][1].get("retried") is True and value(once, 3) == "7"

        twice = await interrupt(2, [CLEAR, {"action": "wait", "amount": 30}, button("7")])
        assert twice["state"] == "failed" and "interrupted by a person twice" in twice["reason"]
