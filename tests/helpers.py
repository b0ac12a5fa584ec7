"""Plain helpers shared by the Docker-backed test folders (no fixtures here)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import docker
import docker.errors

from orchestrator.backends.docker.channel_socket import TARGET as CHANNEL_TARGET
from orchestrator.backends.docker.spec import LOOPBACK_HOSTS
from orchestrator.backends.owner import LABEL_MANAGED
from orchestrator.home import CorralHome

# SPEC S2.1's eight tools, spelled out here (not read from the catalogue) so tests check
# the code against the SPEC.
COMPUTER_TOOLS = frozenset(
    {
        "computer_session_start",
        "computer_screenshot",
        "computer_click",
        "computer_type",
        "computer_key",
        "computer_scroll",
        "computer_navigate",
        "computer_session_stop",
    }
)


def in_xdist_worker() -> bool:
    """True in a pytest-xdist worker (`make test` runs the folders side by side)."""
    return "PYTEST_XDIST_WORKER" in os.environ


def descends_from_me(pid: int) -> bool:
    """Whether process `pid` is this process or one of its descendants (read from
    /proc: a test tells its own children's containers from another suite's)."""
    me = os.getpid()
    for _ in range(64):
        if pid == me:
            return True
        if pid <= 1:
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return False


def leaked_containers(client: docker.DockerClient) -> list[Any]:
    """corral containers this test process left: owned by it, and (outside xdist) those of
    any owner on this host that died. Containers of another live owner (a gateway, another
    test run) are not ours. In an xdist worker dead owners are left out: one may be another
    worker's just-killed gateway whose watchdog is still at work; the controller checks them
    once every worker is done (`leftovers_of_dead_owners`)."""
    me = str(os.getpid())
    dead = None if in_xdist_worker() else _owner_dead_check()
    return [
        c
        for c in _managed(client)
        if c.labels.get("corral.test.pid") == me
        or c.labels.get("corral.owner.pid") == me
        or (dead is not None and dead(c.labels))
    ]


def leftovers_of_dead_owners(client: docker.DockerClient) -> list[Any]:
    """corral containers on this host whose owner (a corral process or a test process) is
    gone: after a whole test run, every one of them is a leak."""
    dead = _owner_dead_check()
    return [c for c in _managed(client) if dead(c.labels)]


def _managed(client: docker.DockerClient) -> list[Any]:
    return list(
        client.containers.list(
            ignore_removed=True, all=True, filters={"label": f"{LABEL_MANAGED}=true"}
        )
    )


def _owner_dead_check() -> Callable[[dict[str, str]], bool]:
    """Whether a container's owner is gone: this host and boot read once, then per label
    set its owner's pid (a corral process) or test pid (a test process) looked up."""
    import socket as _socket

    from orchestrator.backends.owner import owner_is_alive, read_boot_id, read_start_time

    host, boot = _socket.gethostname(), read_boot_id()

    def dead(labels: dict[str, str]) -> bool:
        if "corral.owner.pid" in labels:
            alive = owner_is_alive(labels, host=host, boot_id=boot, start_time_of=read_start_time)
            return alive is False
        test_pid = labels.get("corral.test.pid")
        return (
            test_pid is not None and test_pid.isdigit() and read_start_time(int(test_pid)) is None
        )

    return dead


def remove_and_wait(container: Any) -> None:
    """Force-remove; if a removal is already in progress (409), wait for it to finish."""
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.wait(condition="removed", timeout=60)


def control_labels(kind: str) -> dict[str, str]:
    """Labels for containers a test starts itself (controls, helpers)."""
    return {LABEL_MANAGED: "true", "corral.kind": kind, "corral.test.pid": str(os.getpid())}


def write_config(home: CorralHome, text: str) -> None:
    home.config_file.write_text(text)


def host_addresses() -> list[str]:
    """This machine's own IPv4 addresses (docker0 gateway, primary), never a remote one."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    addrs = []
    for line in out.splitlines():
        parts = line.split()
        addr = parts[3].split("/")[0]
        if not addr.startswith("127."):
            addrs.append(addr)
    return addrs


def bridge_gateway() -> str:
    """The host's own address on docker0, which containers on the default bridge can reach."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[3].split("/")[0]


async def wait_until(
    predicate: Callable[[], Any],
    limit: float = 30.0,
    explain: Callable[[], str] | None = None,
) -> Any:
    """Poll `predicate` (sync or async) until truthy; fail after `limit` s. Not a sleep-sync:
    the check is the condition itself, polled. `explain`, when given, is asked on failure
    what was going on, and its answer is the AssertionError's message."""
    try:
        with anyio.fail_after(limit):
            while True:
                value = predicate()
                if hasattr(value, "__await__"):
                    value = await value
                if value:
                    return value
                await anyio.sleep(0.05)
    except TimeoutError:
        if explain is None:
            raise
        raise AssertionError(f"not within {limit} s: {explain()}") from None


def children_of(pid: int) -> list[tuple[int, list[bytes]]]:
    """(pid, argv) of every live child process of `pid`, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append((int(entry.name), argv))
    return found


def env_with_home(home: CorralHome) -> dict[str, str]:
    env = dict(os.environ)
    env["CORRAL_HOME"] = str(home.root)
    env.pop("CORRAL_OPERATOR_TOKEN", None)  # a test names its operator (tests/e2e/gateways.py)
    return env


def corral_bin() -> str:
    return str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "corral")


def gone(client: docker.DockerClient, container_id: str) -> bool:
    """Whether the engine no longer knows the container."""
    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return True
    return False


def host_mounts(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """What a container has from the host's disk (its inspect `attrs`), besides corral's
    read-only hosts file naming localhost, which a container with no network gets
    (`orchestrator.backends.docker.spec.LOOPBACK_HOSTS`), and its channel's own socket
    (`orchestrator.backends.docker.channel_socket`): both checked here (read-only; the
    socket one file in a private folder of the gateway's)."""
    hosts = [m for m in attrs["Mounts"] if m["Destination"] == "/etc/hosts"]
    for mount in hosts:
        assert mount["Source"] == str(LOOPBACK_HOSTS) and mount["RW"] is False, mount
    channel = [m for m in attrs["Mounts"] if m["Destination"] == CHANNEL_TARGET]
    for mount in channel:
        folder = Path(mount["Source"]).parent
        assert mount["RW"] is False and folder.name.startswith("corral-ch-"), mount
        assert not folder.exists() or folder.stat().st_mode & 0o777 == 0o700, mount
    hosts += channel
    return [m for m in attrs["Mounts"] if m not in hosts]
