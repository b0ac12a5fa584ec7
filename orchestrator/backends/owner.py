"""Who owns a container: this process, identified well enough to tell it is still alive.

A pid alone is not enough (pids are reused), so the owner is the pid plus the
process start time from /proc plus the boot id. The liveness decision is a
pure function of the labels and a `/proc` reader, so it is unit-tested
without processes.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

LABEL_PREFIX = "corral."
LABEL_MANAGED = "corral.managed"
LABEL_KIND = "corral.kind"
LABEL_AGENT = "corral.agent"
LABEL_SESSION = "corral.session"
LABEL_INSTANCE = "corral.instance"
LABEL_OWNER_PID = "corral.owner.pid"
LABEL_OWNER_START = "corral.owner.start"
LABEL_OWNER_BOOT = "corral.owner.boot"
LABEL_OWNER_HOST = "corral.owner.host"
# The owner's watchdog (Docker): while it runs, what its dead owner left is its to remove
# and audit (in the owner's own audit), not any other reaper's.
LABEL_WATCHDOG_PID = "corral.watchdog.pid"
LABEL_WATCHDOG_START = "corral.watchdog.start"


def read_boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def read_start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks), or None if no such process
    runs. A zombie (state Z: exited, not yet waited for) does not run: None too."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


@dataclass(frozen=True, slots=True)
class Owner:
    instance_id: str
    pid: int
    start_time: int
    boot_id: str
    host: str

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        return cls(
            instance_id=uuid.uuid4().hex,
            pid=pid,
            start_time=read_start_time(pid) or 0,
            boot_id=read_boot_id(),
            host=socket.gethostname(),
        )

    def labels(self, *, kind: str, agent: str, session: str) -> dict[str, str]:
        return {
            LABEL_MANAGED: "true",
            LABEL_KIND: kind,
            LABEL_AGENT: agent,
            LABEL_SESSION: session,
            LABEL_INSTANCE: self.instance_id,
            LABEL_OWNER_PID: str(self.pid),
            LABEL_OWNER_START: str(self.start_time),
            LABEL_OWNER_BOOT: self.boot_id,
            LABEL_OWNER_HOST: self.host,
        }


def owner_is_alive(
    labels: Mapping[str, str],
    *,
    host: str,
    boot_id: str,
    start_time_of: Callable[[int], int | None],
) -> bool | None:
    """True if the owner process still runs, False if it is gone, None if we cannot tell.

    None means the container belongs to another host: a reaper leaves it alone.
    A container whose labels are unreadable (no pid) is treated as an orphan
    only if it is ours in every other respect (same host).
    """
    if labels.get(LABEL_OWNER_HOST) != host:
        return None
    if labels.get(LABEL_OWNER_BOOT) != boot_id:
        return False  # the machine rebooted since: its owner cannot be running
    try:
        pid = int(labels[LABEL_OWNER_PID])
        start = int(labels[LABEL_OWNER_START])
    except (KeyError, ValueError):
        return False
    actual = start_time_of(pid)
    return actual is not None and actual == start


def watchdog_labels(pid: int, start_time: int | None) -> dict[str, str]:
    """The labels naming the owner watchdog that will remove a container (pid and start
    time, as the owner is named)."""
    return {LABEL_WATCHDOG_PID: str(pid), LABEL_WATCHDOG_START: str(start_time or 0)}


def reapable(
    labels: Mapping[str, str],
    *,
    host: str,
    boot_id: str,
    start_time_of: Callable[[int], int | None],
) -> bool:
    """Whether a reaper may remove a container (pure): its owner is gone
    (`owner_is_alive` is False) and no watchdog of that owner still runs. A running
    watchdog removes what its owner left and audits it in its owner's audit; another
    reaper (another corral home's gateway on the same engine) would audit it in its own.
    A container without watchdog labels (Kubernetes, or made before they existed) goes
    by its owner alone."""
    if owner_is_alive(labels, host=host, boot_id=boot_id, start_time_of=start_time_of) is not False:
        return False
    if labels.get(LABEL_OWNER_BOOT) != boot_id:
        return True  # rebooted since: no watchdog of that boot runs
    try:
        pid = int(labels[LABEL_WATCHDOG_PID])
        start = int(labels[LABEL_WATCHDOG_START])
    except (KeyError, ValueError):
        return True
    return start_time_of(pid) != start
