"""Reading an agent's files into an `AgentView` (the I/O half of the visibility gate)."""

from __future__ import annotations

from orchestrator.agents.grants import read_grants
from orchestrator.config import AgentConfig, load_agent
from orchestrator.errors import ConfigError
from orchestrator.home import CorralHome
from sandboxes.visibility import AgentView

FAMILIES = (
    "computer_use",
    "codrive",
    "browser_use",
    "desktop_use",
    "mobile_use",
    "ios_use",
)


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
    return load_agent_and_view(home, name)[0]


def load_agent_and_view(home: CorralHome, name: str) -> tuple[AgentView, AgentConfig | None]:
    """The view, and the config it came from (defaults for a missing agent.toml, None for
    one that cannot be used), from one read of the agent's files."""
    path = home.agent_file(name)
    grants = read_grants(home, name)
    if not path.exists():
        return AgentView(name=name, grants=grants), AgentConfig(name=name)
    try:
        agent = load_agent(path)
    except ConfigError as exc:
        return AgentView(name=name, grants=grants, file_problem="; ".join(exc.problems)), None
    if agent.name != name:
        problem = f"its name is {agent.name!r}, not {name!r}"
        return AgentView(name=name, grants=grants, file_problem=problem), None
    return view_from_config(agent, grants), agent
