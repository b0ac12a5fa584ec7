"""Each agent's bearer token for `corral mcp --http`: CORRAL_HOME/tokens/<agent>.token,
made on first use (0600, this user's; see `orchestrator.agents.secret_files`)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.agents.secret_files import load_or_create_secret, replace_secret
from orchestrator.home import CorralHome


def token_path(home: CorralHome, agent: str) -> Path:
    return home.tokens_dir / f"{agent}.token"


def load_or_create_token(home: CorralHome, agent: str) -> str:
    return load_or_create_secret(token_path(home, agent))


def rotate_token(home: CorralHome, agent: str) -> str:
    return replace_secret(token_path(home, agent))
