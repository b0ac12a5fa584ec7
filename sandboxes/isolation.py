"""Every container corral starts, locked down by one builder; every limit defined once.

SPEC S1.2's limits apply to the script sandbox and, unchanged, to kiosk and rig
containers; the egress proxy gets smaller ones. Whatever the kind, a container
is read-only, runs as a non-root user, has no capabilities, cannot gain
privileges, has no swap, and has exactly the network it is given (none unless
named). `orchestrator.backends.docker.spec.create_kwargs` is the one translation of
a `ContainerSpec` into engine arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sandboxes.ports import BindMount, ContainerSpec

NON_ROOT = "1000:1000"
CAP_DROP = ("ALL",)
NO_NEW_PRIVILEGES = "no-new-privileges"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MiB = 1024**2
GiB = 1024**3


@dataclass(frozen=True, slots=True)
class Limits:
    memory_bytes: int
    pids: int
    nano_cpus: int


# SPEC S1.2: 2 GiB, no swap, 256 processes, 1 CPU. Kiosks and rigs get the same.
SANDBOX_LIMITS = Limits(memory_bytes=2 * GiB, pids=256, nano_cpus=1_000_000_000)
# The egress proxy: a small stdlib server, one per session.
PROXY_LIMITS = Limits(memory_bytes=128 * MiB, pids=64, nano_cpus=1_000_000_000)

KIOSK_TMP = "rw,exec,nosuid,nodev,size=512m"
KIOSK_HOME = "/home/sandbox"
KIOSK_HOME_TMPFS = "rw,nosuid,nodev,size=256m,uid=1000,gid=1000"
KIOSK_SHM_BYTES = 256 * MiB

PROXY_PORT = 3128

# CPU weights (Docker's --cpu-shares, 1024 its default): a warm pool's member boots at an
# eighth of a session's surface, so a refill that falls due while sessions are being
# driven takes the CPU they leave (a kiosk's boot is ~1.5 CPU-s: Xvfb, D-Bus, Chromium),
# and it takes the session's weight when claimed. The weights only order containers
# against each other; a member alone on an idle machine boots at full speed.
POOL_CPU_SHARES = 128
SESSION_CPU_SHARES = 1024


def locked_down(
    *,
    image: str,
    labels: Mapping[str, str],
    user: str = NON_ROOT,
    limits: Limits = SANDBOX_LIMITS,
    command: Sequence[str] | None = None,
    network: str | None = None,
    tmpfs: Mapping[str, str] | None = None,
    mounts: Sequence[BindMount] = (),
    environment: Mapping[str, str] | None = None,
    working_dir: str | None = None,
    seccomp: str | None = None,
    name: str | None = None,
    shm_size_bytes: int | None = None,
    dns: Sequence[str] = (),
    stdin_open: bool = False,
    keep_logs: bool = False,
    deadline_seconds: int | None = None,
    runtime: str | None = None,
    channel_socket: bool = False,
    cpu_shares: int | None = None,
) -> ContainerSpec:
    """The one way a ContainerSpec is made. Only what differs between kinds is a parameter;
    read-only root, no capabilities, no-new-privileges and no swap are not."""
    if user.split(":", 1)[0] in ("0", "root"):
        raise ValueError("corral never runs a container as root")
    security = [NO_NEW_PRIVILEGES]
    if seccomp is not None:
        security.append(f"seccomp={seccomp}")
    return ContainerSpec(
        image=image,
        command=tuple(command) if command is not None else None,
        labels=dict(labels),
        user=user,
        network=network,
        read_only=True,
        memory_bytes=limits.memory_bytes,
        memory_swap_bytes=limits.memory_bytes,  # equal to memory: no swap
        pids_limit=limits.pids,
        nano_cpus=limits.nano_cpus,
        cap_drop=CAP_DROP,
        security_opt=tuple(security),
        tmpfs=dict(tmpfs or {}),
        mounts=tuple(mounts),
        environment=dict(environment or {}),
        working_dir=working_dir,
        name=name,
        shm_size_bytes=shm_size_bytes,
        # DNS only matters on a network; without one there is nothing to ask.
        dns=tuple(dns) if network else (),
        stdin_open=stdin_open,
        keep_logs=keep_logs,
        deadline_seconds=deadline_seconds,
        runtime=runtime,
        channel_socket=channel_socket,
        cpu_shares=cpu_shares,
    )


def kiosk_spec(
    *,
    image: str,
    labels: Mapping[str, str],
    network: str | None,
    seccomp: str | None,
    dns: Sequence[str] = (),
    cpu_shares: int | None = None,
) -> ContainerSpec:
    """A kiosk container (SPEC S2.3): the S1.2 limits, Chromium's seccomp profile, a tmpfs
    home, and the agent's channel: on a socket of its own where the backend gives one,
    else stdin (open) and stdout. On a session network, DNS goes only to its gateway (where
    the INPUT rule drops it). The desktop and browser rigs' containers are made here too;
    a warm pool's at `POOL_CPU_SHARES`."""
    return locked_down(
        image=image,
        labels=labels,
        network=network,
        seccomp=seccomp,
        tmpfs={"/tmp": KIOSK_TMP, KIOSK_HOME: KIOSK_HOME_TMPFS},
        shm_size_bytes=KIOSK_SHM_BYTES,
        environment={"HOME": KIOSK_HOME},
        dns=dns,
        stdin_open=True,
        channel_socket=True,
        cpu_shares=cpu_shares,
    )


def proxy_spec(
    *,
    image: str,
    name: str,
    labels: Mapping[str, str],
    network: str,
    pins: Mapping[str, Sequence[str]],
    allow_from: str,
    pin_later: bool = False,
) -> ContainerSpec:
    """One session's egress proxy: the pinned addresses and the one subnet it serves come
    in its environment; its decision log (host, port, decision; never payloads) is kept,
    bounded. `pin_later` (with no pins: a warm pool's) lets one control op set them."""
    return locked_down(
        image=image,
        name=name,
        labels=labels,
        limits=PROXY_LIMITS,
        network=network,
        environment={
            "CORRAL_PINS": json.dumps({h: list(a) for h, a in pins.items()}),
            "CORRAL_ALLOW_FROM": allow_from,
            # The gateway narrows the pins over the proxy's stdin when an allowlist shrinks.
            "CORRAL_CONTROL": "stdin",
            **({"CORRAL_PIN_LATER": "1"} if pin_later and not pins else {}),
        },
        keep_logs=True,
        stdin_open=True,
    )
