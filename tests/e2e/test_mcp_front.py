"""SPEC S5 through the SDK's real client, over stdio and Streamable HTTP."""

from __future__ import annotations

import time

import anyio
import docker
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_front.server import WATCH_INTERVAL_SECONDS
from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from tests.e2e.conftest import (
    AGENT,
    connect,
    free_port,
    set_agent,
    tool_calls,
    wait_until,
)
from tests.helpers import COMPUTER_TOOLS, descends_from_me, write_config

pytestmark = pytest.mark.anyio

NOTIFY_WITHIN = 3.0  # SPEC S5.3 / the issue: within 3 seconds
QUIET_LOOKS = 4  # watcher ticks during which a no-op edit must send nothing


async def test_server_declares_tools_list_changed(agent_home: CorralHome, transport: str) -> None:
    async with connect(agent_home, transport) as mcp:
        caps = mcp.client.session.server_capabilities  # type: ignore[union-attr]
        assert caps is not None and caps.tools is not None
        assert caps.tools.list_changed is True


async def test_fresh_agent_lists_exactly_execute_program(
    agent_home: CorralHome, transport: str
) -> None:
    async with connect(agent_home, transport) as mcp:
        assert await mcp.tool_names() == {"execute_program"}


async def test_capability_toggles_change_the_list_and_notify_within_3_seconds(
    agent_home: CorralHome, transport: str
) -> None:
    async with connect(agent_home, transport) as mcp:
        assert await mcp.tool_names() == {"execute_program"}
        set_agent(agent_home, computer_use=True)
        edited = anyio.current_time()
        await wait_until(lambda: mcp.list_changed, limit=NOTIFY_WITHIN + 2)
        assert mcp.list_changed[0] - edited <= NOTIFY_WITHIN
        assert await mcp.tool_names() == {"execute_program"} | COMPUTER_TOOLS

        set_agent(agent_home, computer_use=False)
        await wait_until(lambda: len(mcp.list_changed) >= 2, limit=NOTIFY_WITHIN + 2)
        assert await mcp.tool_names() == {"execute_program"}


async def test_rewriting_a_file_with_the_same_effective_set_sends_nothing(
    agent_home: CorralHome, transport: str
) -> None:
    async with connect(agent_home, transport) as mcp:
        await mcp.tool_names()
        # Same visible set: a comment change, then a change that affects nothing visible.
        path = agent_home.agent_file(AGENT)
        path.write_text(path.read_text() + "\n# touched\n")
        set_agent(agent_home, denied_tools=["codrive_run"])  # codrive is off anyway
        # The watcher looks every WATCH_INTERVAL_SECONDS; give it several looks at the no-op
        # files on their own, so a watcher that notified on any edit would be caught here
        # (a bounded wait for something that must NOT happen, not a synchronisation).
        with anyio.move_on_after(QUIET_LOOKS * WATCH_INTERVAL_SECONDS):
            await wait_until(lambda: mcp.list_changed, limit=NOTIFY_WITHIN + 2)
        assert mcp.list_changed == []
        # A real change is still notified, exactly once.
        set_agent(agent_home, denied_tools=["codrive_run"], computer_use=True)
        await wait_until(lambda: mcp.list_changed, limit=NOTIFY_WITHIN + 2)
        assert len(mcp.list_changed) == 1


async def test_grants_show_and_hide_a_scoped_tool(agent_home: CorralHome, transport: str) -> None:
    from orchestrator.agents.grants import add_grant, revoke_grant

    set_agent(agent_home, computer_use=True, scoped_tools=["computer_navigate"])
    async with connect(agent_home, transport) as mcp:
        assert "computer_navigate" not in await mcp.tool_names()
        add_grant(agent_home, AGENT, "computer_navigate")
        await wait_until(lambda: mcp.list_changed, limit=NOTIFY_WITHIN + 2)
        assert "computer_navigate" in await mcp.tool_names()
        revoke_grant(agent_home, AGENT, "computer_navigate")
        await wait_until(lambda: len(mcp.list_changed) >= 2, limit=NOTIFY_WITHIN + 2)
        assert "computer_navigate" not in await mcp.tool_names()


async def test_a_hidden_tool_called_anyway_gets_the_gates_own_message(
    agent_home: CorralHome, transport: str
) -> None:
    set_agent(agent_home, computer_use=True, denied_tools=["mcp__corral__computer_*"])
    async with connect(agent_home, transport) as mcp:
        assert await mcp.tool_names() == {"execute_program"}
        with pytest.raises(MCPError) as caught:
            await mcp.client.call_tool("computer_click", {"x": 1, "y": 1})
    assert caught.value.error.code == -32003
    assert caught.value.error.message == (
        "computer_click is denied for agent alice by [capabilities] denied_tools"
    )
    last = tool_calls(agent_home)[-1]
    assert (last["tool"], last["decision"], last["code"]) == ("computer_click", "refused", -32003)


async def test_a_permissions_refusal_is_32003_with_an_audit_line(
    agent_home: CorralHome, transport: str
) -> None:
    path = agent_home.agent_file(AGENT)
    path.write_text(path.read_text().replace("execute_program = true", "execute_program = false"))
    async with connect(agent_home, transport) as mcp:
        assert "execute_program" in await mcp.tool_names()  # listed but refused (S5.4)
        with pytest.raises(MCPError) as caught:
            await mcp.client.call_tool("execute_program", {"code": "print(1)"})
    assert caught.value.error.code == -32003
    assert "[permissions] execute_program = false" in caught.value.error.message
    events = AuditLog(agent_home.audit_file).read()
    assert [e["event"] for e in events] == ["permission_denied"]
    assert events[0]["details"]["tool"] == "execute_program"


async def test_an_unparseable_agent_toml_refuses_permission_gated_tools(
    agent_home: CorralHome, transport: str
) -> None:
    agent_home.agent_file(AGENT).write_text("this is [not toml\n")
    async with connect(agent_home, transport) as mcp:
        with pytest.raises(MCPError) as caught:
            await mcp.client.call_tool("execute_program", {"code": "print(1)"})
    assert caught.value.error.code == -32003
    assert "could not be used" in caught.value.error.message


async def test_a_computer_tool_says_when_the_gateway_is_not_running(
    agent_home: CorralHome, transport: str
) -> None:
    port = free_port()  # nothing listens there
    agent_home.config_file.write_text(f"[gateway]\nport = {port}\n")
    set_agent(agent_home, computer_use=True)
    async with connect(agent_home, transport) as mcp:
        result = await mcp.client.call_tool("computer_click", {"x": "12", "y": 3})
    assert result.is_error
    assert result.content[0].text == (  # type: ignore[union-attr]
        f"corral gateway is not running at http://127.0.0.1:{port}; start it with `corral gateway`"
    )


async def test_a_gated_in_codrive_tool_without_a_gateway_says_how_to_start_one(
    agent_home: CorralHome, transport: str
) -> None:
    """codrive runs in the gateway (the agent's desktop rig): with none running, the
    front answers with a clear error naming the command, not a crash or a hang."""
    set_agent(agent_home, codrive=True)
    async with connect(agent_home, transport) as mcp:
        result = await mcp.client.call_tool("codrive_status", {})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "gateway is not running" in text and "corral gateway" in text


async def test_out_of_range_arguments_name_the_parameter_and_range(
    agent_home: CorralHome, transport: str
) -> None:
    async with connect(agent_home, transport) as mcp:
        result = await mcp.client.call_tool(
            "execute_program", {"code": "print(1)", "timeout_seconds": 301}
        )
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "timeout_seconds" in text and "1 to 300" in text


async def test_execute_program_returns_text_and_structured_content(
    agent_home: CorralHome, transport: str
) -> None:
    async with connect(agent_home, transport) as mcp:
        result = await mcp.client.call_tool(
            "execute_program",
            {
                "code": "import os; print('uid', os.getuid()); raise SystemExit(3)",
                "timeout_seconds": "20",
            },
        )
    assert not result.is_error
    assert result.content[0].text.startswith("uid 1000\n")  # type: ignore[union-attr]
    data = result.structured_content
    assert data is not None
    assert data["exit_code"] == 3 and data["output"] == "uid 1000\n"
    assert {"timed_out", "truncated", "duration_ms"} <= set(data)
    last = tool_calls(agent_home)[-1]
    assert (last["tool"], last["decision"]) == ("execute_program", "allowed")
    assert last["arg_names"] == ["code", "timeout_seconds"]
    assert "uid" not in agent_home.tool_calls_file.read_text()  # never argument values


SLOW = "import time\nprint('started', flush=True)\ntime.sleep(120)\n"


def _script_containers(client: docker.DockerClient) -> list[str]:
    """The ids of the agent's script containers that this test's own processes (its
    `corral mcp`, the gateway it started) own: another suite on the same engine may run
    scripts for an agent of the same name. Idle warm pool containers are labelled agent
    `warm-pool` and would hide a claimed one, so the tests that count these run with the
    pool off (`_cold`); the warm path's cancel and owner death are proven in
    tests/integration (test_script_lifecycle [warm], test_script_pool)."""
    found = client.containers.list(
        ignore_removed=True,
        all=True,
        filters={"label": ["corral.managed=true", f"corral.agent={AGENT}", "corral.kind=script"]},
    )
    return [c.id for c in found if descends_from_me(int(c.labels.get("corral.owner.pid", 0)))]


def _gone(client: docker.DockerClient, ids: list[str]) -> bool:
    """None of these containers is left (whoever owns them now)."""
    left = client.containers.list(ignore_removed=True, all=True, filters={"id": ids})
    return not [c for c in left if c.id in ids]


def _cold(home: CorralHome) -> None:
    write_config(home, "[container.sandbox]\nwarm = 0\n")


async def test_client_cancel_removes_the_container(
    agent_home: CorralHome, transport: str, docker_client: docker.DockerClient
) -> None:
    _cold(agent_home)
    async with connect(agent_home, transport) as mcp:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(mcp.client.call_tool, "execute_program", {"code": SLOW})
                ids = await wait_until(lambda: _script_containers(docker_client))
                scope.cancel()
        await wait_until(lambda: _gone(docker_client, ids))
        # The server is still usable after the cancellation.
        assert await mcp.tool_names() == {"execute_program"}


async def test_client_disconnect_mid_run_removes_the_container(
    agent_home: CorralHome, transport: str, docker_client: docker.DockerClient
) -> None:
    _cold(agent_home)
    with anyio.CancelScope() as scope:
        async with connect(agent_home, transport) as mcp, anyio.create_task_group() as tg:
            tg.start_soon(mcp.client.call_tool, "execute_program", {"code": SLOW})
            ids = await wait_until(lambda: _script_containers(docker_client))
            scope.cancel()  # leaves the client (and, for stdio, ends the server process)
    await wait_until(lambda: _gone(docker_client, ids))


SLEEPER = (
    "import time\nprint('start', time.time(), flush=True)\ntime.sleep(3)\n"
    "print('end', time.time())\n"
)


def interval(text: str) -> tuple[float, float]:
    words = text.split()
    return float(words[words.index("start") + 1]), float(words[words.index("end") + 1])


async def test_scripts_beyond_the_limit_wait_or_are_busy_and_other_calls_still_answer(
    agent_home: CorralHome,
) -> None:
    """Three times the limit of sleeping scripts at once: `max_concurrent` run, `max_queued`
    wait their turn, the rest are told "busy" at once; tools/list keeps answering."""
    agent_home.config_file.write_text(
        "[container.sandbox]\nmax_concurrent = 2\nmax_queued = 2\nqueue_timeout_seconds = 60\n"
    )
    async with connect(agent_home, "stdio") as mcp:
        results: list[tuple[float, bool, str]] = []
        listed_at: list[float] = []

        async def run_one() -> None:
            result = await mcp.client.call_tool("execute_program", {"code": SLEEPER})
            text = " ".join(b.text for b in result.content if isinstance(b, types.TextContent))
            results.append((time.time(), bool(result.is_error), text))

        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(run_one)
            await wait_until(lambda: len(results) >= 2)  # the two busy answers
            for _ in range(3):
                assert "execute_program" in await mcp.tool_names()
                listed_at.append(time.time())

    busy = [r for r in results if r[1]]
    ran = [interval(text) for _, is_error, text in results if not is_error]
    assert len(busy) == 2 and len(ran) == 4, results
    assert all(text.startswith("busy: ") and "max_concurrent" in text for _, _, text in busy)
    first_end = min(end for _, end in ran)
    assert all(at < first_end for at, _, _ in busy)  # answered at once, not after a wait
    assert all(at < first_end for at in listed_at)  # tools/list answered while scripts ran
    # Never more than two scripts running at any moment.
    for start, _ in ran:
        assert sum(1 for s, e in ran if s <= start < e) <= 2
    assert max(s for s, _ in ran) >= first_end  # the queued pair started after one ended
