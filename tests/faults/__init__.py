"""Faults injected under work in flight (issue 26); helpers shared by its tests."""

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome


def write_default_agent(home: CorralHome, name: str) -> None:
    """Agent `name` as `corral agents new` writes it (scripts only, the default rules)."""
    home.agent_file(name).parent.mkdir(parents=True, exist_ok=True)
    home.agent_file(name).write_text(render_new_agent(name))
