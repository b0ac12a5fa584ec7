"""The fake kubelet's container runtime for images it runs for real: the Docker engine.

An image the fake node maps to `IN_DOCKER` (a rig's: Chromium, Xvfb, ...) is not run as
a host process but as a container made from the pod's own manifest, the way a kubelet
hands a pod to its runtime: the container's securityContext (user, read-only root,
capabilities, no-new-privileges), its resources, its memory emptyDirs as tmpfs volumes
(empty, root's, mode 0777, as a kubelet makes them), `/dev/shm`'s emptyDir as the shm
size, its env, working directory, command (which replaces the image's ENTRYPOINT, as on
Kubernetes) and stdin.
The node has no pod network: every such container gets `--network none` (a pod that
needs its session's proxy cannot be run this way). A `Localhost` seccomp profile is
the node's file, which this node has not: Docker's default profile stands in, as for
`RuntimeDefault`. The containers carry `LABEL` (this process's pid) and are removed with
their pod; `leftover_containers` lets a test check that.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio

LABEL = "corral-test.fake-kubelet"


@dataclass(frozen=True, slots=True)
class InDocker:
    """An image the fake node runs in the Docker engine (not as a host process)."""


IN_DOCKER = InDocker()


def container_name(namespace: str, pod: str) -> str:
    return f"fakekube-{namespace}-{pod}"


def _quantity_bytes(quantity: str) -> int:
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return int(quantity.removesuffix(unit)) * factor
    return int(quantity)


def _mount_args(pod: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    sizes = {
        v["name"]: v["emptyDir"].get("sizeLimit", "64Mi")
        for v in pod["spec"].get("volumes") or []
        if (v.get("emptyDir") or {}).get("medium") == "Memory"
    }
    args: list[str] = []
    for mount in container.get("volumeMounts") or []:
        size = sizes.get(mount["name"])
        assert size is not None, f"the Docker node has only memory emptyDirs: {mount}"
        size_bytes = _quantity_bytes(size)
        if mount["mountPath"] == "/dev/shm":
            args += ["--shm-size", str(size_bytes)]
        else:
            # An emptyDir: empty (none of the image's files), root's, mode 0777, in
            # memory. A tmpfs volume, not `--tmpfs`, which copies the image's directory
            # (its files and owner) up into the mount.
            options = f'"volume-opt=o=size={size_bytes},mode=0777"'
            args += [
                "--mount",
                f"type=volume,dst={mount['mountPath']},volume-nocopy=true,"
                f"volume-opt=type=tmpfs,volume-opt=device=tmpfs,{options}",
            ]
    return args


def create_argv(namespace: str, pod: Mapping[str, Any]) -> list[str]:
    """`docker create` for the pod's one container, from its manifest."""
    container = pod["spec"]["containers"][0]
    ctx = container.get("securityContext") or {}
    limits = (container.get("resources") or {}).get("limits") or {}
    argv = ["docker", "create", "--name", container_name(namespace, pod["metadata"]["name"])]
    argv += ["--label", f"{LABEL}={os.getpid()}", "--network", "none", "--pids-limit", "256"]
    argv += ["--user", f"{ctx.get('runAsUser', 1000)}:{ctx.get('runAsGroup', 1000)}"]
    if ctx.get("readOnlyRootFilesystem"):
        argv.append("--read-only")
    for cap in (ctx.get("capabilities") or {}).get("drop") or []:
        argv += ["--cap-drop", cap]
    if ctx.get("allowPrivilegeEscalation") is False:
        argv += ["--security-opt", "no-new-privileges"]
    if "memory" in limits:
        memory = str(_quantity_bytes(limits["memory"]))
        argv += ["--memory", memory, "--memory-swap", memory]
    if "cpu" in limits:
        argv += ["--cpus", str(limits["cpu"])]
    argv += _mount_args(pod, container)
    for env in container.get("env") or []:
        argv += ["--env", f"{env['name']}={env.get('value', '')}"]
    if "workingDir" in container:
        argv += ["--workdir", container["workingDir"]]
    if container.get("stdin"):
        argv.append("--interactive")
    command = list(container.get("command") or [])
    if command:
        argv += ["--entrypoint", command[0]]
    return [*argv, container["image"], *command[1:]]


def start_argv(namespace: str, pod: str, *, stdin: bool) -> list[str]:
    """The process the fake kubelet watches: attached to the container's stdio."""
    flags = ["--attach", "--interactive"] if stdin else ["--attach"]
    return ["docker", "start", *flags, container_name(namespace, pod)]


def exec_argv(name: str, argv: list[str], *, stdin: bool) -> list[str]:
    """A process in the container, as its user (an exec on Kubernetes runs as the pod's)."""
    flags = ["--interactive"] if stdin else []
    return ["docker", "exec", *flags, name, *argv]


async def create(namespace: str, pod: Mapping[str, Any]) -> str:
    """Create the pod's container (not started); its name."""
    await anyio.run_process(create_argv(namespace, pod), check=True)
    return container_name(namespace, pod["metadata"]["name"])


async def remove(name: str) -> None:
    """Remove the container, running or not; gone already is fine."""
    with anyio.CancelScope(shield=True):
        await anyio.run_process(["docker", "rm", "--force", "--volumes", name], check=False)


def leftover_containers() -> list[str]:
    """The containers this process's fake node made that still exist."""
    listed = subprocess.run(
        ["docker", "ps", "--all", "--filter", f"label={LABEL}={os.getpid()}", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line)["Names"] for line in listed.stdout.splitlines() if line.strip()]
