"""`corral operators`, `corral approvals` and `corral sessions`: the people's commands
(SPEC S6.1). Approvals and sessions go to the running gateway over loopback as an
operator: with the token `corral operators add` printed, from --token-file FILE or
$CORRAL_OPERATOR_TOKEN (orchestrator.gateway.admin_api); operators are a file in
CORRAL_HOME."""

from __future__ import annotations

import datetime
import json
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.markup import escape
from rich.table import Table

from corral_cli.common import fail, out, read_home
from orchestrator.errors import CorralError
from orchestrator.gateway.admin_client import admin_call
from orchestrator.gateway.wire import (
    ADMIN_APPROVALS_PATH,
    ADMIN_DECIDE_PATH,
    ADMIN_SESSION_ACT_PATH,
    ADMIN_SESSIONS_PATH,
)

_home = read_home
_fail = fail


NO_TOKEN = (
    "an operator token is needed: set CORRAL_OPERATOR_TOKEN or pass --token-file FILE "
    "(`corral operators add NAME` prints one)"
)
_F = TypeVar("_F", bound=Callable[..., Any])


def token_option(command: _F) -> _F:
    """--token-file FILE: the file holding the operator's token (else the environment's)."""
    return click.option(
        "--token-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="File holding your operator token (default: $CORRAL_OPERATOR_TOKEN).",
    )(command)


def operator_token(token_file: Path | None) -> str:
    """The operator's token: from `token_file` (this user's, no access for group or
    others, like any secret), else $CORRAL_OPERATOR_TOKEN; exit 2 when there is none."""
    if token_file is None:
        token = _home().env.operator_token
        if token is None:
            _fail(NO_TOKEN, code=2)
        return token
    try:
        mode = stat.S_IMODE(token_file.stat().st_mode)
        text = token_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"--token-file {token_file}: cannot be read: {exc}", code=2)
    if mode & 0o077:
        _fail(
            f"--token-file {token_file} has mode {mode:04o}: group or others may read your "
            f"token; run `chmod 600 {token_file}`",
            code=2,
        )
    if not text:
        _fail(f"--token-file {token_file} is empty", code=2)
    return text


def _admin(token_file: Path | None, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    token = operator_token(token_file)
    try:
        return admin_call(_home(), token, path, payload)
    except CorralError as exc:
        _fail(exc)


def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S")


# ------------------------------------------------------------------------ operators
@click.group()
def operators() -> None:
    """Operators: named people who approve held actions and use the console."""


@operators.command("add")
@click.argument("name")
def operators_add(name: str) -> None:
    """Create operator NAME and print its console token (shown once, stored hashed)."""
    from orchestrator.people.operators import add_operator

    try:
        token = add_operator(_home(), name)
    except CorralError as exc:
        _fail(exc)
    out.print(f"operator {name} added. Console token (shown once, only its hash is kept):")
    click.echo(token)


@operators.command("list")
def operators_list() -> None:
    """List operators (names and creation times; tokens are never shown again)."""
    from orchestrator.people.operators import list_operators

    try:
        found = list_operators(_home())
    except CorralError as exc:
        _fail(exc)
    for op in found:
        created = datetime.datetime.fromtimestamp(op.created_at).isoformat(timespec="seconds")
        out.print(f"{op.name}\tcreated {created}")


@operators.command("remove")
@click.argument("name")
def operators_remove(name: str) -> None:
    """Remove operator NAME: its token stops working for new console logins at once."""
    from orchestrator.people.operators import remove_operator

    try:
        remove_operator(_home(), name)
    except CorralError as exc:
        _fail(exc)
    out.print(f"operator {name} removed")


# ------------------------------------------------------------------------ approvals
@click.group()
def approvals() -> None:
    """Held actions waiting for an operator (the gateway must be running)."""


@approvals.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON list, for scripts.")
@click.option("--all", "show_all", is_flag=True, help="Also recently decided ones.")
@token_option
def approvals_list(as_json: bool, show_all: bool, token_file: Path | None) -> None:
    """Pending approvals (with --all, decided ones too), newest first."""
    found: list[dict[str, Any]] = _admin(token_file, ADMIN_APPROVALS_PATH, {})["approvals"]
    if not show_all:
        found = [a for a in found if a["state"] == "pending"]
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found:
        out.print("no pending approvals" if not show_all else "no approvals")
        return
    table = Table("id", "agent", "category", "description", "digest", "state", "expires in")
    now = time.time()
    for a in found:
        left = f"{max(0, int(a['expires_at'] - now))} s" if a["state"] == "pending" else "-"
        digest = (a.get("digest") or "-")[:12]
        table.add_row(
            a["id"], a["agent"], a["category"], escape(a["description"]), digest, a["state"], left
        )
    out.print(table)


@approvals.command("show")
@click.argument("approval_id")
@click.option("--json", "as_json", is_flag=True, help="The approval as JSON, for scripts.")
@token_option
def approvals_show(approval_id: str, as_json: bool, token_file: Path | None) -> None:
    """The exact action APPROVAL_ID is for: tool, parameters (typed text as its length),
    surface, the target as read and their digest."""
    found: list[dict[str, Any]] = _admin(token_file, ADMIN_APPROVALS_PATH, {})["approvals"]
    approval = next((a for a in found if a["id"] == approval_id), None)
    if approval is None:
        _fail(f"no approval {approval_id!r} (see `corral approvals list --all`)")
    if as_json:
        click.echo(json.dumps(approval, indent=2))
        return
    for line in shown_approval(approval):
        out.print(escape(line), highlight=False)


def shown_approval(a: dict[str, Any]) -> list[str]:
    """An approval as `corral approvals show` prints it, one line each."""
    action = a.get("action") or {}
    lines = [
        f"{a['id']}  {a['state']}  agent {a['agent']}, surface {a['session']}",
        f"rule:          {a['rule']} ({a['category']})",
        f"held:          {a['description']}",
        f"tool:          {action.get('tool', a['tool'])}",
        f"parameters:    {json.dumps(action.get('params'), ensure_ascii=False)}",
        f"target:        {json.dumps(action.get('target'), ensure_ascii=False)}",
        f"digest:        sha256 {a.get('digest') or '- (not bound to one input)'}",
    ]
    if a.get("decided_by"):
        lines.append(
            f"decided by:    {a['decided_by']}" + (f" ({a['reason']})" if a["reason"] else "")
        )
    return lines


def _decide(approval_id: str, decision: str, reason: str, token_file: Path | None) -> None:
    payload = {"id": approval_id, "decision": decision, "reason": reason}
    answer = _admin(token_file, ADMIN_DECIDE_PATH, payload)
    approval = answer["approval"]
    out.print(f"{approval['id']} {approval['state']} ({escape(approval['description'])})")


@approvals.command("approve")
@click.argument("approval_id")
@token_option
def approvals_approve(approval_id: str, token_file: Path | None) -> None:
    """Approve APPROVAL_ID as the operator your token names: the held call runs now."""
    _decide(approval_id, "approve", "", token_file)


@approvals.command("deny")
@click.argument("approval_id")
@click.option("--reason", default="", help="Told to the agent and audited (<= 500 chars).")
@token_option
def approvals_deny(approval_id: str, reason: str, token_file: Path | None) -> None:
    """Deny APPROVAL_ID: the held call answers with a refusal naming the rule."""
    _decide(approval_id, "deny", reason, token_file)


# ------------------------------------------------------------------------ sessions
@click.group()
def sessions() -> None:
    """Running kiosk sessions: list, take over, hand back, stop (gateway must run)."""


@sessions.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON list, for scripts.")
@token_option
def sessions_list(as_json: bool, token_file: Path | None) -> None:
    """Every running session with its controller and actions used."""
    found: list[dict[str, Any]] = _admin(token_file, ADMIN_SESSIONS_PATH, {})["sessions"]
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found:
        out.print("no running sessions")
        return
    table = Table("agent", "session", "kind", "started", "actions used/left", "state")
    for s in found:
        table.add_row(
            s["agent"],
            s["session"],
            s["kind"],
            _when(s["started_at"]),
            f"{s['actions_used']}/{s['actions_left']}",
            escape(s["state"]),
        )
    out.print(table)


def _act(agent: str, action: str, token_file: Path | None) -> None:
    _admin(token_file, ADMIN_SESSION_ACT_PATH, {"agent": agent, "action": action})


# (the action, its help, what is said once it is done)
SESSION_ACTIONS = (
    (
        "takeover",
        "Take AGENT's desktop: its AI input is refused until hand back.",
        "you have the desktop of {agent}; the AI's input is refused until hand back",
    ),
    (
        "handback",
        "Give AGENT's desktop back to the AI.",
        "the desktop of {agent} is the AI's again",
    ),
    (
        "stop",
        "Stop AGENT's session and remove its containers.",
        "the session of {agent} is stopped",
    ),
)


def _session_command(action: str, help_text: str, done: str) -> None:
    @sessions.command(action, help=help_text)
    @click.argument("agent")
    @token_option
    def command(agent: str, token_file: Path | None) -> None:
        _act(agent, action, token_file)
        out.print(done.format(agent=agent))


for _action in SESSION_ACTIONS:
    _session_command(*_action)


COMMANDS = (operators, approvals, sessions)
