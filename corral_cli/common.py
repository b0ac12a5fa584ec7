"""What every `corral` command shares: the two consoles, the environment read once into a
`CorralHome` (the one place corral takes its settings from `os.environ`), and the
agent-name check."""

from __future__ import annotations

import os
from typing import NoReturn

from rich.console import Console
from rich.markup import escape

from orchestrator.config import AGENT_NAME_RE
from orchestrator.home import CorralHome

err = Console(stderr=True, highlight=False, emoji=False)
out = Console(highlight=False, emoji=False)


def read_home() -> CorralHome:
    """CORRAL_HOME and the rest of the environment corral follows, read once per command."""
    try:
        return CorralHome.from_env(os.environ)
    except ValueError as exc:  # a CORRAL_IMAGE_TAG that is not a Docker tag
        fail(exc, code=2)


def fail(problem: BaseException | str, *, code: int = 1) -> NoReturn:
    """Say what went wrong on stderr and exit with `code`."""
    err.print(f"[red]error:[/red] {escape(str(problem))}")
    raise SystemExit(code) from (problem if isinstance(problem, BaseException) else None)


def agent_arg(agent: str, what: str = "agent") -> str:
    """`agent` if it is a valid agent name; else exit 2 saying so."""
    if not AGENT_NAME_RE.fullmatch(agent):
        fail(f"{what} {agent!r}: not a valid agent name", code=2)
    return agent
