"""Private folders named for their process, swept once it is gone
(orchestrator.backends.folders): the channel sockets' (tests/unit/test_channel_socket_fits.py)
and the browser rigs' CDP sockets'."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, cast

import anyio

from orchestrator.backends.folders import private_folder
from orchestrator.surfaces.browser.cdp import DIR_PREFIX, CdpBridge


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()  # ended and reaped: /proc has no entry for it
    return child.pid


def test_a_kind_sweeps_its_own_dead_folders_only(tmp_path: Path) -> None:
    dead = _dead_pid()
    gone = tmp_path / f"corral-cdp-{dead}-abcd"
    other_kind = tmp_path / f"corral-ch-{dead}-abcd"
    live = tmp_path / f"corral-cdp-{os.getpid()}-efgh"
    for folder in (gone, other_kind, live):
        folder.mkdir()
    (gone / "cdp.sock").write_text("")

    made = private_folder("corral-cdp-", tmp_path)

    assert not gone.exists() and other_kind.exists() and live.exists()
    assert made.name.startswith(f"corral-cdp-{os.getpid()}-")
    assert made.stat().st_mode & 0o777 == 0o700


def test_a_cdp_bridge_folder_is_named_for_its_process_and_removed_at_close() -> None:
    """What a killed gateway's bridge leaves is found by its pid (the e2e kill test's
    gateway left one in /tmp each run before)."""
    bridge = CdpBridge(cast(Any, None))
    folder = bridge.socket_path.parent
    assert folder.name.startswith(f"{DIR_PREFIX}{os.getpid()}-") and folder.exists()
    anyio.run(bridge.close)
    assert not folder.exists()
