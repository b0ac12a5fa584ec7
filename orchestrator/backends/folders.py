"""Private folders of a gateway's own under the temporary directory (0700), named
`<prefix><pid>-<random>`: a folder left by a process that died (SIGKILL: nothing of it
ran to remove it) is removed by the next process that makes one of the same kind
(`private_folder` sweeps first). Used for the containers' channel sockets
(`backends/docker/channel_socket.py`) and the browser rigs' CDP sockets
(`surfaces/browser/cdp.py`)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path


def private_folder(prefix: str, parent: Path | None = None) -> Path:
    """A new 0700 folder `<prefix><this pid>-<random>` under `parent` (the temporary
    directory), after the ones of dead processes with that prefix are swept."""
    where = parent or Path(tempfile.gettempdir())
    sweep(where, prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where))


def sweep(parent: Path, prefix: str) -> list[Path]:
    """Remove the folders `<prefix><pid>-...` under `parent` that are this user's and
    whose process is gone (what a killed gateway left); the ones removed. A symlink is
    never followed, nor removed."""
    removed = []
    for folder in parent.glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix) :].split("-", 1)[0]
        try:
            found = folder.lstat()
        except OSError:
            continue
        mine = stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid()
        if mine and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
