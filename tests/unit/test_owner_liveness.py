"""Who owns a container, and whether that owner still runs (SPEC S0: reaping orphans)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.backends.owner import (
    LABEL_AGENT,
    LABEL_INSTANCE,
    LABEL_KIND,
    LABEL_MANAGED,
    LABEL_OWNER_BOOT,
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_SESSION,
    LABEL_WATCHDOG_PID,
    LABEL_WATCHDOG_START,
    Owner,
    owner_is_alive,
    read_boot_id,
    read_start_time,
    reapable,
    watchdog_labels,
)

pytestmark = pytest.mark.unit

HOST = "box-1"
BOOT = "boot-aaaa"
PID = 4242
START = 987654

StartTimeOf = Callable[[int], int | None]


def labels(**overrides: str) -> dict[str, str]:
    base = {
        LABEL_MANAGED: "true",
        LABEL_OWNER_HOST: HOST,
        LABEL_OWNER_BOOT: BOOT,
        LABEL_OWNER_PID: str(PID),
        LABEL_OWNER_START: str(START),
    }
    base.update(overrides)
    return base


def started_at(start: int) -> StartTimeOf:
    """A /proc reader in which only pid 4242 runs, started at `start`."""

    def start_time_of(pid: int) -> int | None:
        return start if pid == PID else None

    return start_time_of


def no_process(pid: int) -> int | None:
    return None


def alive(
    container_labels: dict[str, str], start_time_of: StartTimeOf | None = None
) -> bool | None:
    return owner_is_alive(
        container_labels,
        host=HOST,
        boot_id=BOOT,
        start_time_of=start_time_of or started_at(START),
    )


def test_a_container_from_another_host_cannot_be_judged() -> None:
    assert alive(labels(**{LABEL_OWNER_HOST: "box-2"})) is None


def test_a_container_without_a_host_label_cannot_be_judged() -> None:
    container = labels()
    del container[LABEL_OWNER_HOST]

    assert alive(container) is None


def test_an_owner_from_before_a_reboot_is_gone() -> None:
    assert alive(labels(**{LABEL_OWNER_BOOT: "boot-bbbb"})) is False


def test_an_owner_whose_pid_runs_with_the_same_start_time_is_alive() -> None:
    assert alive(labels()) is True


def test_a_reused_pid_with_a_different_start_time_is_not_the_owner() -> None:
    assert alive(labels(), start_time_of=started_at(START + 1)) is False


def test_an_owner_whose_pid_is_gone_is_dead() -> None:
    assert alive(labels(), start_time_of=no_process) is False


@pytest.mark.parametrize("missing", [LABEL_OWNER_PID, LABEL_OWNER_START])
def test_a_container_missing_its_owner_labels_on_this_host_is_an_orphan(missing: str) -> None:
    container = labels()
    del container[missing]

    assert alive(container) is False


@pytest.mark.parametrize(
    ("key", "value"), [(LABEL_OWNER_PID, "abc"), (LABEL_OWNER_START, ""), (LABEL_OWNER_PID, "")]
)
def test_unreadable_owner_labels_on_this_host_mean_an_orphan(key: str, value: str) -> None:
    assert alive(labels(**{key: value})) is False


# ------------------------------------------------------------------ the real /proc


def test_the_current_owner_labels_carry_every_corral_key() -> None:
    owner = Owner.current()

    found = owner.labels(kind="script", agent="alice", session="s-1")

    assert found[LABEL_MANAGED] == "true"
    assert found[LABEL_KIND] == "script"
    assert found[LABEL_AGENT] == "alice"
    assert found[LABEL_SESSION] == "s-1"
    assert found[LABEL_INSTANCE] == owner.instance_id
    assert found[LABEL_OWNER_PID] == str(os.getpid())
    assert found[LABEL_OWNER_START] == str(read_start_time(os.getpid()))
    assert found[LABEL_OWNER_HOST] == socket.gethostname()
    assert all(key.startswith("corral.") for key in found)
    assert all(isinstance(value, str) for value in found.values())


def test_two_owners_in_one_process_have_different_instance_ids() -> None:
    assert Owner.current().instance_id != Owner.current().instance_id


def test_the_current_process_is_judged_alive_from_its_own_labels() -> None:
    found = Owner.current().labels(kind="script", agent="a", session="s")

    verdict = owner_is_alive(
        found, host=socket.gethostname(), boot_id=read_boot_id(), start_time_of=read_start_time
    )

    assert verdict is True


def test_read_start_time_of_this_process_is_a_positive_int() -> None:
    start = read_start_time(os.getpid())

    assert isinstance(start, int)
    assert start > 0


def test_read_start_time_of_a_pid_that_cannot_exist_is_none() -> None:
    # PID_MAX_LIMIT is 2**22 on 64-bit Linux: no process ever has a larger pid.
    assert read_start_time(2**22 + 1) is None


def test_read_start_time_survives_a_command_name_with_spaces_and_parentheses(
    tmp_path: Path,
) -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    weird = tmp_path / "a) 1 2 (b"
    weird.symlink_to(sleep)
    own = read_start_time(os.getpid())
    odd_child = subprocess.Popen([str(weird), "30"])
    plain_child = subprocess.Popen([sleep, "30"])
    try:
        odd = read_start_time(odd_child.pid)
        plain = read_start_time(plain_child.pid)
        assert "a) 1 2 (b" in Path(f"/proc/{odd_child.pid}/stat").read_text()
    finally:
        for child in (odd_child, plain_child):
            child.kill()
            child.wait()

    assert own is not None
    assert odd is not None
    assert plain is not None
    assert own <= odd <= plain  # started in this order: field 22 read, not a shifted field


def test_read_boot_id_is_the_kernel_boot_id() -> None:
    boot = read_boot_id()

    assert boot == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert boot != "unknown"


def test_a_zombie_process_counts_as_dead() -> None:
    import subprocess

    from orchestrator.backends.owner import read_start_time as start_time

    child = subprocess.Popen(["true"])
    try:
        # Not waited for yet: it exits and stays a zombie until we reap it.
        def state() -> str:
            with open(f"/proc/{child.pid}/stat") as fh:
                raw = fh.read()
            return raw[raw.rindex(")") + 2 :].split()[0]

        while state() != "Z":
            pass  # busy-polls the exit itself, which takes microseconds
        assert start_time(child.pid) is None
    finally:
        child.wait()


# ------------------------------------------------------------------ reapable
WATCHDOG_PID = 5151
WATCHDOG_START = 987700


def running(owner: int | None = None, watchdog: int | None = None) -> StartTimeOf:
    """A /proc reader in which the owner (pid 4242) and the watchdog (pid 5151) run when
    given their start times."""
    table = {PID: owner, WATCHDOG_PID: watchdog}
    return lambda pid: table.get(pid)


def reapable_here(found: dict[str, str], start_time_of: StartTimeOf) -> bool:
    return reapable(found, host=HOST, boot_id=BOOT, start_time_of=start_time_of)


WATCHED = watchdog_labels(WATCHDOG_PID, WATCHDOG_START)


def test_a_dead_owners_container_is_left_to_its_watchdog_while_that_runs() -> None:
    # The owner is gone; its watchdog is sweeping: it removes and audits this container.
    assert not reapable_here(labels(**WATCHED), running(watchdog=WATCHDOG_START))


def test_a_dead_owners_container_is_reaped_once_its_watchdog_is_gone_too() -> None:
    assert reapable_here(labels(**WATCHED), running())
    # a process reusing the watchdog's pid is not the watchdog
    assert reapable_here(labels(**WATCHED), running(watchdog=WATCHDOG_START + 1))


def test_a_live_owners_container_is_never_reapable_whatever_its_watchdog() -> None:
    assert not reapable_here(labels(**WATCHED), running(owner=START))
    assert not reapable_here(labels(**WATCHED), running(owner=START, watchdog=WATCHDOG_START))


def test_without_watchdog_labels_the_owner_alone_decides() -> None:
    # Kubernetes pods, and containers made before the labels existed.
    assert reapable_here(labels(), running())
    assert not reapable_here(labels(), running(owner=START))
    assert reapable_here(labels(**{LABEL_WATCHDOG_PID: "x", LABEL_WATCHDOG_START: "1"}), running())


def test_after_a_reboot_no_watchdog_holds_a_container_back() -> None:
    # the same pid and start time in the new boot are another process
    rebooted = labels(**WATCHED, **{LABEL_OWNER_BOOT: "boot-old"})
    assert reapable_here(rebooted, running(watchdog=WATCHDOG_START))


def test_another_hosts_container_is_never_reapable() -> None:
    elsewhere = labels(**WATCHED, **{LABEL_OWNER_HOST: "box-2"})
    assert not reapable_here(elsewhere, running())


def test_the_watchdog_labels_name_a_running_watchdog_as_the_owner_labels_do() -> None:
    me = os.getpid()
    found = watchdog_labels(me, read_start_time(me))
    assert found == {LABEL_WATCHDOG_PID: str(me), LABEL_WATCHDOG_START: str(read_start_time(me))}
