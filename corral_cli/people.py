"""`corral operators`, `corral approvals` and `corral sessions`: the people's commands
(SPEC S6.1). Approvals and sessions go to the running gateway over the signed loopback
channel (orchestrator.gateway.admin_api); operators are a file in CORRAL_HOME."""

from __future__ import annotations

import datetime
import getpass
import json
import time
from typing import Any

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


def _operator(name: str | None) -> str:
    """Who decides: --as NAME, else the local user (`local:<user>`)."""
    return name or f"local:{getpass.getuser()}"


def _when(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S")


AS_OPTION = click.option(
    "--as", "operator", default=None, help="Operator name for the audit (default: local:USER)."
)


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
def approvals_list(as_json: bool, show_all: bool) -> None:
    """Pending approvals (with --all, decided ones too), newest first."""
    try:
        found: list[dict[str, Any]] = admin_call(_home(), ADMIN_APPROVALS_PATH, {})["approvals"]
    except CorralError as exc:
        _fail(exc)
    if not show_all:
        found = [a for a in found if a["state"] == "pending"]
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found:
        out.print("no pending approvals" if not show_all else "no approvals")
        return
    table = Table("id", "agent", "category", "description", "state", "expires in")
    now = time.time()
    for a in found:
        left = f"{max(0, int(a['expires_at'] - now))} s" if a["state"] == "pending" else "-"
        table.add_row(
            a["id"], a["agent"], a["category"], escape(a["description"]), a["state"], left
        )
    out.print(table)


def _decide(approval_id: str, decision: str, operator: str | None, reason: str) -> None:
    try:
        answer = admin_call(
            _home(),
            ADMIN_DECIDE_PATH,
            {
                "id": approval_id,
                "decision": decision,
                "operator": _operator(operator),
                "reason": reason,
            },
        )
    except CorralError as exc:
        _fail(exc)
    approval = answer["approval"]
    out.print(f"{approval['id']} {approval['state']} ({escape(approval['description'])})")


@approvals.command("approve")
@click.argument("approval_id")
@AS_OPTION
def approvals_approve(approval_id: str, operator: str | None) -> None:
    """Approve APPROVAL_ID: the held call runs now."""
    _decide(approval_id, "approve", operator, "")


@approvals.command("deny")
@click.argument("approval_id")
@click.option("--reason", default="", help="Told to the agent and audited (<= 500 chars).")
@AS_OPTION
def approvals_deny(approval_id: str, reason: str, operator: str | None) -> None:
    """Deny APPROVAL_ID: the held call answers with a refusal naming the rule."""
    _decide(approval_id, "deny", operator, reason)


# ------------------------------------------------------------------------ sessions
@click.group()
def sessions() -> None:
    """Running kiosk sessions: list, take over, hand back, stop (gateway must run)."""


@sessions.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON list, for scripts.")
def sessions_list(as_json: bool) -> None:
    """Every running session with its controller and actions used."""
    try:
        found: list[dict[str, Any]] = admin_call(_home(), ADMIN_SESSIONS_PATH, {})["sessions"]
    except CorralError as exc:
        _fail(exc)
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


def _act(agent: str, action: str, operator: str | None) -> None:
    try:
        admin_call(
            _home(),
            ADMIN_SESSION_ACT_PATH,
            {"agent": agent, "action": action, "operator": _operator(operator)},
        )
    except CorralError as exc:
        _fail(exc)


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
    @AS_OPTION
    def command(agent: str, operator: str | None) -> None:
        _act(agent, action, operator)
        out.print(done.format(agent=agent))


for _action in SESSION_ACTIONS:
    _session_command(*_action)


COMMANDS = (operators, approvals, sessions)
