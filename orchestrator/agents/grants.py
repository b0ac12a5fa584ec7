"""Active grants for scoped tools: `agents/<name>/grants.json`, a sorted JSON list of names.

Written atomically (temp file + rename) so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from orchestrator.home import CorralHome


def grants_file(home: CorralHome, agent: str) -> Path:
    return home.agents_dir / agent / "grants.json"


def read_grants(home: CorralHome, agent: str) -> frozenset[str]:
    path = grants_file(home, agent)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return frozenset()
    except (OSError, ValueError):
        return frozenset()  # unreadable grants grant nothing
    if not isinstance(data, list):
        return frozenset()  # a corrupt file grants nothing (a dict's keys are not grants)
    return frozenset(item for item in data if isinstance(item, str))


def write_grants(home: CorralHome, agent: str, grants: frozenset[str]) -> None:
    path = grants_file(home, agent)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".grants-")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(sorted(grants), fh)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def add_grant(home: CorralHome, agent: str, tool: str) -> bool:
    current = read_grants(home, agent)
    if tool in current:
        return False
    write_grants(home, agent, current | {tool})
    return True


def revoke_grant(home: CorralHome, agent: str, tool: str) -> bool:
    current = read_grants(home, agent)
    if tool not in current:
        return False
    write_grants(home, agent, current - {tool})
    return True
