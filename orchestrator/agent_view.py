"""Reading an agent's files into an `AgentView` (the I/O half of the visibility gate)."""

from __future__ import annotations

from orchestrator.config import AgentConfig, load_agent
from orchestrator.errors import ConfigError
from orchestrator.grants import read_grants
from orchestrator.home import CorralHome
from sandboxes.visibility import AgentView

FAMILIES = ("computer_use", "codrive", "os_native", "browser_use", "mobile_use", "ios_use")


def view_from_config(agent: AgentConfig, grants: frozenset[str]) -> AgentView:
    caps = agent.capabilities
    return AgentView(
        name=agent.name,
        capabilities=frozenset(f for f in FAMILIES if getattr(caps, f)),
        read_only=caps.read_only,
        allowed_tools=tuple(caps.allowed_tools),
        denied_tools=tuple(caps.denied_tools),
        scoped_tools=tuple(caps.scoped_tools),
        grants=grants,
        permissions=agent.permissions.model_dump(),
    )


def load_view(home: CorralHome, name: str) -> AgentView:
    """A missing agent.toml means a fresh agent (every optional family off, permissions
    allowed); one that exists but cannot be used turns every optional family off and
    refuses the [permissions] tools."""
    path = home.agent_file(name)
    grants = read_grants(home, name)
    if not path.exists():
        return AgentView(name=name, grants=grants)
    try:
        agent = load_agent(path)
    except ConfigError as exc:
        return AgentView(name=name, grants=grants, file_problem="; ".join(exc.problems))
    if agent.name != name:
        return AgentView(
            name=name,
            grants=grants,
            file_problem=f"its name is {agent.name!r}, not {name!r}",
        )
    return view_from_config(agent, grants)
