"""Faults injected under work in flight (issue 26); helpers shared by its tests."""

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.images import ENV


def write_default_agent(home: CorralHome, name: str) -> None:
    """Agent `name` as `corral agents new` writes it (scripts only, the default rules)."""
    home.agent_file(name).parent.mkdir(parents=True, exist_ok=True)
    home.agent_file(name).write_text(render_new_agent(name))


@contextlib.contextmanager
def home_on_tmpfs(where: Path, size_mb: int) -> Iterator[CorralHome]:
    """A CORRAL_HOME on a tmpfs of its own (`size_mb`), mounted at `where` for the block:
    a disk the test may fill, never the machine's own."""
    where.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)]
    subprocess.run(mount, check=True)
    try:
        home = CorralHome(root=where / "corral-home", env=ENV)
        home.ensure()
        yield home
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=True)
