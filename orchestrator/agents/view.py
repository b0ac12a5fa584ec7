"""Reading an agent's files into an `AgentView` (the I/O half of the visibility gate).

The gateway and the MCP front ask for a view on every call and from loops that poll
(the tool-list watch, the expiry loops), so the async readers (`agent_and_view`,
`view_of`) keep the last parse per agent and re-read only when agent.toml or grants.json
or config.toml changes (inode, size, mtime or ctime), off the event loop. A file changed within
`RACY_SECONDS` is re-read every time: an edit in the same clock tick as the last read
would otherwise look unchanged."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from orchestrator.agents.grants import grants_file, read_grants
from orchestrator.config import AgentConfig, load_agent, load_config
from orchestrator.config.cached import Stamp, file_stamp, settled
from orchestrator.errors import ConfigError
from orchestrator.home import CorralHome
from sandboxes.visibility import AgentView

# The families whose use depends on config.toml as well as on agent.toml.
SERVER_DEPENDENT = ("mobile_use", "ios_use")
FAMILIES = (
    "computer_use",
    "codrive",
    "browser_use",
    "desktop_use",
    "mobile_use",
    "ios_use",
    "recording",
)


def view_from_config(
    agent: AgentConfig, grants: frozenset[str], unavailable: dict[str, str] | None = None
) -> AgentView:
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
        unavailable=unavailable or {},
    )


def agent_names(home: CorralHome) -> list[str]:
    """The agents with an agent.toml, by name (blocking: call in a worker thread)."""
    if not home.agents_dir.exists():
        return []
    return sorted(path.parent.name for path in home.agents_dir.glob("*/agent.toml"))


def server_unavailable(home: CorralHome) -> dict[str, str]:
    """The families config.toml leaves this server unable to serve (a phone family with no
    device), each with why; all of them when config.toml cannot be used."""
    try:
        config = load_config(home.config_file)
    except ConfigError as exc:
        why = f"config.toml could not be used ({'; '.join(exc.problems)})"
        return {family: why for family in SERVER_DEPENDENT}
    return config.rigs.unavailable()


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
    missing = server_unavailable(home)
    if not path.exists():
        return AgentView(name=name, grants=grants, unavailable=missing), AgentConfig(name=name)
    try:
        agent = load_agent(path)
    except ConfigError as exc:
        problem = "; ".join(exc.problems)
        return AgentView(name=name, grants=grants, file_problem=problem), None
    if agent.name != name:
        problem = f"its name is {agent.name!r}, not {name!r}"
        return AgentView(name=name, grants=grants, file_problem=problem), None
    return view_from_config(agent, grants, missing), agent


Loaded = tuple[AgentView, AgentConfig | None]


class ViewCache:
    """The last view read per (CORRAL_HOME, agent), with the stamps of the files it came
    from. Thread-safe enough for its use: a lost race re-reads, never serves stale."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._kept: dict[tuple[Path, str], tuple[tuple[Stamp, ...], Loaded]] = {}

    def get(self, home: CorralHome, name: str, stamps: tuple[Stamp, ...] | None = None) -> Loaded:
        """The view and config (as `load_agent_and_view`), parsed again only if a file
        changed. The stamps are taken before the read (or were, by `lookup`: `stamps`), so
        a change during it is seen next time."""
        if stamps is None:
            stamps = _stamps(home, name)
        kept = self._kept.get((home.root, name))
        if kept is not None and kept[0] == stamps:
            return kept[1]
        loaded = load_agent_and_view(home, name)
        if settled(stamps, self.clock()):
            self._kept[(home.root, name)] = (stamps, loaded)
        else:
            self._kept.pop((home.root, name), None)
        return loaded

    def lookup(self, home: CorralHome, name: str) -> tuple[tuple[Stamp, ...], Loaded | None]:
        """The files' stamps now (three stats), and the kept view if none changed since it
        was read, else None (then `get` with these stamps reads it again)."""
        stamps = _stamps(home, name)
        kept = self._kept.get((home.root, name))
        return stamps, (kept[1] if kept is not None and kept[0] == stamps else None)


def _stamps(home: CorralHome, name: str) -> tuple[Stamp, ...]:
    return tuple(file_stamp(path) for path in _watched(home.root, name))


@functools.lru_cache(maxsize=256)  # stamped at every call: the paths are kept
def _watched(root: Path, name: str) -> tuple[Path, Path, Path]:
    home = CorralHome(root)
    return (home.agent_file(name), grants_file(home, name), home.config_file)


VIEWS = ViewCache()


async def agent_and_view(home: CorralHome, name: str) -> Loaded:
    """`load_agent_and_view` for async callers: cached, and read off the event loop. The
    files' stamps are taken on the loop (three stats, microseconds): a worker thread's round
    trip on every call cost more than they do (issue 23 item 9); a changed file is parsed
    in a worker thread."""
    stamps, kept = VIEWS.lookup(home, name)
    if kept is not None:
        return kept
    return await anyio.to_thread.run_sync(VIEWS.get, home, name, stamps)


async def view_of(home: CorralHome, name: str) -> AgentView:
    """`load_view` for async callers: cached, and read off the event loop."""
    return (await agent_and_view(home, name))[0]
