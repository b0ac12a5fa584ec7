"""Errors to MCP answers (`call_outcome`, SPEC S5.4) and `tool_calls.jsonl` (SPEC S5.6)."""

from __future__ import annotations

import json
import logging
import re
import socket
import stat
import types as pytypes
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_front.errors import (
    INVALID_PARAMS,
    PERMISSION_DENIED,
    GateRefusal,
    call_outcome,
)
from mcp_front.server import CorralMCP
from mcp_front.tool_log import ToolCallLog
from orchestrator.audit import AuditLog
from orchestrator.errors import (
    ConfigError,
    EngineError,
    NotAvailable,
    ParamError,
    SandboxUnavailable,
    UnavailableCode,
)
from orchestrator.home import CorralHome

pytestmark = pytest.mark.unit


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# ------------------------------------------------------------------ call_outcome


def test_a_param_error_becomes_an_error_result_naming_the_tool() -> None:
    result = call_outcome("computer_click", ParamError("x: must be at least 0 (got -1)"))

    assert result.is_error is True
    assert text_of(result) == "Invalid arguments for computer_click: x: must be at least 0 (got -1)"


def test_sandbox_unavailable_becomes_an_error_result_with_its_own_message() -> None:
    exc = SandboxUnavailable(
        UnavailableCode.IMAGE_MISSING,
        "image corral-sandbox:latest is not present",
        "corral images build",
    )

    result = call_outcome("execute_program", exc)

    assert result.is_error is True
    assert text_of(result) == str(exc)
    assert text_of(result).startswith("Script sandbox unavailable (image_missing): ")
    assert "corral images build" in text_of(result)


@pytest.mark.parametrize(
    "exc",
    [
        NotAvailable("mobile_use needs an Android device: none is configured"),
        EngineError("the engine said 500"),
        ConfigError("/home/x/config.toml", ["key 'gateway.port': too big"]),
    ],
    ids=["not-available", "engine-error", "config-error"],
)
def test_every_corral_error_becomes_an_error_result_with_its_message(exc: Exception) -> None:
    result = call_outcome("execute_program", exc)

    assert result.is_error is True
    assert text_of(result) == str(exc)


def test_a_gate_refusal_is_re_raised_as_a_permission_denied_json_rpc_error() -> None:
    refusal = GateRefusal("execute_program is refused: [permissions] execute_program = false")

    with pytest.raises(GateRefusal) as info:
        call_outcome("execute_program", refusal)

    assert info.value is refusal
    assert info.value.code == PERMISSION_DENIED == -32003
    assert info.value.message == refusal.gate_message
    assert str(info.value) == "execute_program is refused: [permissions] execute_program = false"


def test_an_unknown_tool_refusal_keeps_its_invalid_params_code() -> None:
    with pytest.raises(MCPError) as info:
        call_outcome("nope", GateRefusal("Unknown tool: nope", code=INVALID_PARAMS))

    assert info.value.code == -32602


def test_an_unexpected_error_is_answered_without_its_details_but_with_an_incident_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="corral.mcp"):
        result = call_outcome("execute_program", RuntimeError("secret internal detail"))

    text = text_of(result)
    assert result.is_error is True
    assert "secret internal detail" not in text
    assert "RuntimeError" not in text
    assert "execute_program" in text
    match = re.search(r"incident ([0-9a-f]{8})", text)
    assert match is not None, text
    # The details went to the server's log, under the same incident id.
    [record] = [r for r in caplog.records if r.name == "corral.mcp"]
    assert match.group(1) in record.getMessage()
    assert record.exc_info is not None
    assert "secret internal detail" in str(record.exc_info[1])


def test_each_unexpected_error_gets_its_own_incident_id() -> None:
    ids = {
        re.search(r"incident (\w+)", text_of(call_outcome("t", ValueError("x")))).group(1)  # type: ignore[union-attr]
        for _ in range(20)
    }

    assert len(ids) == 20


# ------------------------------------------------------------------ ToolCallLog


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_call_is_one_json_line_with_agent_tool_decision_duration_and_arg_names(
    tmp_path: Path,
) -> None:
    log = ToolCallLog(tmp_path / "tool_calls.jsonl")

    log.record(
        agent="ann",
        tool="execute_program",
        decision="allowed",
        duration_ms=42,
        arg_names=["timeout_seconds", "code"],
    )
    log.record(
        agent="ann",
        tool="codrive_run",
        decision="refused",
        duration_ms=0,
        arg_names=(),
        code=-32003,
        reason="codrive_run is not enabled",
    )
    log.record(agent="bob", tool="computer_click", decision="error", duration_ms=3)

    first, second, third = read_lines(tmp_path / "tool_calls.jsonl")
    assert set(first) == {"time", "agent", "tool", "decision", "duration_ms", "arg_names"}
    assert first["agent"] == "ann"
    assert first["tool"] == "execute_program"
    assert first["decision"] == "allowed"
    assert first["duration_ms"] == 42
    assert first["arg_names"] == ["code", "timeout_seconds"]
    assert second["decision"] == "refused"
    assert second["code"] == -32003
    assert second["reason"] == "codrive_run is not enabled"
    assert second["arg_names"] == []
    assert third["decision"] == "error"
    assert third["agent"] == "bob"


def test_the_tool_call_log_records_argument_names_never_values(tmp_path: Path) -> None:
    log = ToolCallLog(tmp_path / "tool_calls.jsonl")
    arguments = {"code": "print('hunter2-secret')", "url": "https://user:pw@bank.example/"}

    log.record(
        agent="ann", tool="execute_program", decision="allowed", duration_ms=1, arg_names=arguments
    )

    raw = (tmp_path / "tool_calls.jsonl").read_text()
    assert "hunter2-secret" not in raw
    assert "bank.example" not in raw
    assert read_lines(tmp_path / "tool_calls.jsonl")[0]["arg_names"] == ["code", "url"]


def test_the_tool_call_log_is_private_to_the_owner(tmp_path: Path) -> None:
    path = tmp_path / "new-dir" / "tool_calls.jsonl"

    ToolCallLog(path).record(agent="a", tool="t", decision="allowed", duration_ms=0)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_the_tool_call_log_appends_and_never_rewrites(tmp_path: Path) -> None:
    path = tmp_path / "tool_calls.jsonl"
    path.write_text('{"earlier":"line"}\n')

    ToolCallLog(path).record(agent="a", tool="t", decision="allowed", duration_ms=0)

    lines = path.read_text().splitlines()
    assert lines[0] == '{"earlier":"line"}'
    assert json.loads(lines[1])["tool"] == "t"


# ------------------------------------------------------------------ the server's dispatch gate


@pytest.fixture
def app(corral_home: CorralHome) -> CorralMCP:
    path = corral_home.agent_file("ann")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('name = "ann"\n[capabilities]\ncomputer_use = true\n')
    # A port nothing listens on: the forwarder must say the gateway is not running.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    corral_home.config_file.write_text(f"[gateway]\nport = {port}\n")
    return CorralMCP(corral_home, "ann")


async def call(app: CorralMCP, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    ctx = pytypes.SimpleNamespace(protocol_version="2025-06-18", session=object())
    return await app._call_tool(ctx, types.CallToolRequestParams(name=tool, arguments=arguments))


@pytest.mark.anyio
async def test_every_call_allowed_or_refused_is_one_log_line_without_argument_values(
    app: CorralMCP, corral_home: CorralHome
) -> None:
    bad = await call(app, "computer_type", {"text": "", "extra": "hunter2-secret"})
    with pytest.raises(GateRefusal) as hidden:
        await call(app, "codrive_run", {"target_app": "hunter2-secret"})
    with pytest.raises(GateRefusal) as unknown:
        await call(app, "no_such_tool", {"x": "hunter2-secret"})
    later = await call(app, "computer_key", {"key": "Return"})

    assert bad.is_error and text_of(bad).startswith("Invalid arguments for computer_type:")
    assert hidden.value.code == PERMISSION_DENIED
    assert unknown.value.code == INVALID_PARAMS
    assert later.is_error and "corral gateway is not running" in text_of(later)
    raw = corral_home.tool_calls_file.read_text()
    assert "hunter2-secret" not in raw
    lines = read_lines(corral_home.tool_calls_file)
    assert [(e["tool"], e["decision"], e.get("code")) for e in lines] == [
        ("computer_type", "error", None),
        ("codrive_run", "refused", -32003),
        ("no_such_tool", "refused", -32602),
        ("computer_key", "error", None),
    ]
    assert lines[0]["arg_names"] == ["extra", "text"]
    assert lines[1]["reason"] == str(hidden.value)


@pytest.mark.anyio
async def test_a_permission_refusal_is_minus_32003_and_audited_as_permission_denied(
    corral_home: CorralHome,
) -> None:
    path = corral_home.agent_file("ann")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('name = "ann"\n[permissions]\nexecute_program = false\n')
    app = CorralMCP(corral_home, "ann")

    with pytest.raises(GateRefusal) as info:
        await call(app, "execute_program", {"code": "print('hunter2-secret')"})

    assert info.value.code == -32003
    assert "[permissions] execute_program = false" in str(info.value)
    [event] = AuditLog(corral_home.audit_file).read()
    assert event["event"] == "permission_denied"
    assert event["agent"] == "ann"
    assert event["details"]["tool"] == "execute_program"
    assert "hunter2-secret" not in corral_home.audit_file.read_text()
    [line] = read_lines(corral_home.tool_calls_file)
    assert (line["decision"], line["code"]) == ("refused", -32003)
