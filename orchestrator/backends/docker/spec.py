"""A `ContainerSpec` as the Docker engine takes it: the one place a spec becomes engine
arguments (`create_kwargs`, pure), and the create call that uses them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker
from docker.models.containers import _create_container_args  # type: ignore[attr-defined]

from sandboxes.ports import ContainerSpec

# The /etc/hosts of a container with no network (read-only): the engine writes none then.
LOOPBACK_HOSTS = Path(__file__).resolve().parent / "loopback_hosts"


def create_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    """The SDK's `containers.create` keyword arguments for a spec (pure): the one place a
    ContainerSpec becomes engine arguments. Docker's `init` is never used: it would
    bind-mount the host's docker-init; images that need an init bring tini."""
    kwargs: dict[str, Any] = {
        "image": spec.image,
        "labels": dict(spec.labels),
        "user": spec.user,
        "read_only": spec.read_only,
        "mem_limit": spec.memory_bytes,
        "memswap_limit": spec.memory_swap_bytes,
        "pids_limit": spec.pids_limit,
        "nano_cpus": spec.nano_cpus,
        "cap_drop": list(spec.cap_drop),
        "security_opt": list(spec.security_opt),
        "tmpfs": dict(spec.tmpfs),
        "environment": dict(spec.environment),
        "log_config": (
            {"type": "json-file", "config": {"max-size": "1m", "max-file": "2"}}
            if spec.keep_logs
            else {"type": "none", "config": {}}
        ),
        "stdin_open": spec.stdin_open,
        "init": False,  # explicit: a daemon.json `init: true` would mount the host's binary
        "tty": False,
        "detach": True,
    }
    if spec.command is not None:
        kwargs["command"] = list(spec.command)
    volumes = {
        m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in spec.mounts
    }
    # A named network is joined at create time (`network`); otherwise there is none, and
    # the engine is told so (`network_disabled`): the container still gets a network
    # namespace of its own with only loopback up (the kernel's and runc's doing), but the
    # engine's network stack is skipped (no libnetwork sandbox, no setkey hook: a
    # container's create, start and removal take half the CPU, docs/benchmarks.md). The
    # engine then writes no /etc/hosts nor /etc/resolv.conf: corral's hosts file names
    # localhost; nothing else resolves.
    if spec.network is None:
        kwargs["network_mode"] = "none"
        kwargs["network_disabled"] = True
        volumes[str(LOOPBACK_HOSTS)] = {"bind": "/etc/hosts", "mode": "ro"}
    else:
        kwargs["network"] = spec.network
    if volumes:
        kwargs["volumes"] = volumes
    if spec.working_dir is not None:
        kwargs["working_dir"] = spec.working_dir
    if spec.name is not None:
        kwargs["name"] = spec.name
    if spec.shm_size_bytes is not None:
        kwargs["shm_size"] = spec.shm_size_bytes
    if spec.dns:
        kwargs["dns"] = list(spec.dns)
    if spec.runtime is not None:
        kwargs["runtime"] = spec.runtime
    if spec.cpu_shares is not None:
        kwargs["cpu_shares"] = spec.cpu_shares
    return kwargs


def create_container(
    client: docker.DockerClient, spec: ContainerSpec, labels: Mapping[str, str]
) -> str:
    """`containers.create` without the inspect it makes afterwards (one engine round trip
    less per run): the same `create_kwargs`, through the SDK's own conversion, with
    `labels` added (the owner watchdog's create token)."""
    kwargs = create_kwargs(spec)
    kwargs["labels"].update(labels)
    kwargs["version"] = client.api.api_version
    created = client.api.create_container(**_create_container_args(kwargs))
    return str(created["Id"])
