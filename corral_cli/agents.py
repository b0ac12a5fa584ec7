"""`corral agents` (agents/<name>/agent.toml) and `corral grants` (the scoped tools an
agent holds now)."""

from __future__ import annotations

import click
from rich.table import Table

from corral_cli.common import agent_arg, fail, out, read_home
from orchestrator.config import AGENT_NAME_RE, load_agent, render_new_agent
from orchestrator.errors import ConfigError


@click.group()
def agents() -> None:
    """Manage AI employees (agents/<name>/agent.toml)."""


@agents.command("new")
@click.argument("name")
def agents_new(name: str) -> None:
    """Write agents/NAME/agent.toml with every optional capability off."""
    if not AGENT_NAME_RE.fullmatch(name):
        fail(
            f"agent name {name!r}: must be a lower-case letter then up to 62 "
            "lower-case letters, digits, '-' or '_'",
            code=2,
        )
    home = read_home()
    home.ensure()
    path = home.agent_file(name)
    if path.exists():
        fail(f"{path} already exists; edit it or remove it first")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(render_new_agent(name))
    out.print(f"wrote {path}")


@agents.command("list")
def agents_list() -> None:
    """List agents and whether their agent.toml is valid."""
    home = read_home()
    table = Table("agent", "status", "capabilities on")
    for path in sorted(home.agents_dir.glob("*/agent.toml")) if home.agents_dir.exists() else []:
        try:
            agent = load_agent(path)
        except ConfigError as exc:
            table.add_row(path.parent.name, "[red]invalid[/red]", "; ".join(exc.problems))
            continue
        caps = agent.capabilities.model_dump()
        on = [k for k, v in caps.items() if v is True]
        table.add_row(agent.name, "ok", ", ".join(on) or "-")
    out.print(table)


@click.group()
def grants() -> None:
    """Grant or revoke scoped tools ([capabilities] scoped_tools) for an agent."""


# (the change, its help, what is said when it changed the grants, and when not)
GRANT_CHANGES = (
    (
        "add",
        "Give AGENT an active grant for TOOL; its MCP clients are told within seconds.",
        "granted {tool} to {agent}",
        "{agent} already holds {tool}",
    ),
    (
        "revoke",
        "Revoke AGENT's grant for TOOL.",
        "revoked {tool} from {agent}",
        "{agent} held no grant for {tool}",
    ),
)


def _grant_command(change: str, help_text: str, changed: str, unchanged: str) -> None:
    @grants.command(change, help=help_text)
    @click.argument("agent")
    @click.argument("tool")
    def command(agent: str, tool: str) -> None:
        from orchestrator.agents.grants import add_grant, revoke_grant

        apply = add_grant if change == "add" else revoke_grant
        did = apply(read_home(), agent_arg(agent), tool)
        out.print((changed if did else unchanged).format(agent=agent, tool=tool))


for _change in GRANT_CHANGES:
    _grant_command(*_change)


@grants.command("list")
@click.argument("agent")
def grants_list(agent: str) -> None:
    """List AGENT's active grants."""
    from orchestrator.agents.grants import read_grants

    for tool in sorted(read_grants(read_home(), agent_arg(agent))):
        out.print(tool)
