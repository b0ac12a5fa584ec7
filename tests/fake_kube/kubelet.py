"""The fake API server's kubelet: runs a pod's one container as a process on this host.

A pod is real enough to test the backend's protocol against: its image must be one the
fake "node" has (else it stays Pending in ErrImageNeverPull/ErrImagePull, as a real
one does); its ConfigMap and emptyDir volumes become directories, and every path under
a mount in the command, working directory and environment is rewritten to them; its
output goes only to the attach streams open at the moment it is written (a real
attach does not replay what came before); `activeDeadlineSeconds` kills it
(phase Failed, reason DeadlineExceeded); deleting it kills it. It runs as the test's
user, not in a container: only tests' own scripts run here. An image the node maps to
`docker_node.IN_DOCKER` (a rig's) runs instead as a container of the Docker engine built
from the pod's manifest, attached to its stdio (`docker_node`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from tests.fake_kube import docker_node
from tests.fake_kube.docker_node import InDocker
from tests.fake_kube.store import Store

STDOUT, STDERR = 1, 2
LOG_CAP = 16 * 1024 * 1024  # a pod's log keeps its first 16 MiB (a kubelet rotates its own)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PodRun:
    mounts: dict[str, Path]
    env: dict[str, str]
    cwd: str | None
    process: anyio.abc.Process | None = None
    listeners: list[MemoryObjectSendStream[tuple[int, bytes]]] = field(default_factory=list)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    attached_stdin: bool = False
    docker: str | None = None  # the container's name, when the node runs it in Docker
    # Creating the container and stopping the pod take turns: a pod deleted while its
    # container is made waits for it, then removes it; two stops (the DELETE's and the
    # run's own end) remove it once, and the second returns when it is gone.
    turn: anyio.Lock = field(default_factory=anyio.Lock)
    stopping: bool = False
    log: bytearray = field(default_factory=bytearray)  # its output, as `pods/log` gives it

    def rewrite(self, text: str) -> str:
        for target, source in sorted(self.mounts.items(), key=lambda kv: -len(kv[0])):
            if text == target or text.startswith(target + "/"):
                return str(source) + text[len(target) :]
        return text


class Kubelet:
    def __init__(
        self, store: Store, root: Path, images: Mapping[str, Sequence[str] | InDocker | None]
    ) -> None:
        self.store = store
        self.root = root
        # What the node has: image -> its CMD (None: none), or IN_DOCKER (run for real).
        self.images = images
        self.runs: dict[tuple[str, str], PodRun] = {}
        self.logs: dict[tuple[str, str], bytearray] = {}  # kept until the pod is deleted
        self.tasks: anyio.abc.TaskGroup | None = None

    def pod_created(self, namespace: str, name: str) -> None:
        assert self.tasks is not None
        self.tasks.start_soon(self._run, namespace, name)

    def _status(self, namespace: str, name: str, **changes: Any) -> dict[str, Any] | None:
        try:
            pod = self.store.get("pods", namespace, name)
        except Exception:
            return None  # deleted meanwhile
        status = pod.setdefault("status", {})
        status.update(changes)
        self.store.modified("pods", pod)
        return pod

    @staticmethod
    def _conditions(ready: bool) -> list[dict[str, str]]:
        flag = "True" if ready else "False"
        return [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": flag},
            {"type": "Ready", "status": flag},
        ]

    def _container_status(self, pod: dict[str, Any], state: dict[str, Any]) -> list[Any]:
        container = pod["spec"]["containers"][0]
        return [
            {
                "name": container["name"],
                "image": container["image"],
                "imageID": "",
                "ready": "running" in state,
                "restartCount": 0,
                "started": "running" in state,
                "state": state,
            }
        ]

    async def _run(self, namespace: str, name: str) -> None:
        pod = self.store.get("pods", namespace, name)
        container = pod["spec"]["containers"][0]
        waiting = {"waiting": {"reason": "ContainerCreating"}}
        self._status(
            namespace,
            name,
            phase="Pending",
            startTime=_now(),
            conditions=self._conditions(False),
            containerStatuses=self._container_status(pod, waiting),
        )
        if container["image"] not in self.images:
            policy = container.get("imagePullPolicy", "IfNotPresent")
            reason = "ErrImageNeverPull" if policy == "Never" else "ErrImagePull"
            state = {"waiting": {"reason": reason, "message": f"image {container['image']}"}}
            self._status(namespace, name, containerStatuses=self._container_status(pod, state))
            return
        run = self._prepare(namespace, pod)
        self.runs[(namespace, name)] = run
        self.logs[(namespace, name)] = run.log
        try:
            await self._execute(namespace, name, pod, run)
        finally:
            with anyio.CancelScope(shield=True):
                await self._stop(run)
                shutil.rmtree(self.root / namespace / name, ignore_errors=True)
                self.runs.pop((namespace, name), None)

    def _prepare(self, namespace: str, pod: dict[str, Any]) -> PodRun:
        base = self.root / namespace / pod["metadata"]["name"]
        volumes = {}
        for volume in pod["spec"].get("volumes") or []:
            path = base / volume["name"]
            path.mkdir(parents=True)
            if "configMap" in volume:
                config = self.store.get("configmaps", namespace, volume["configMap"]["name"])
                for key, value in (config.get("data") or {}).items():
                    (path / key).write_text(value)
            volumes[volume["name"]] = path
        container = pod["spec"]["containers"][0]
        mounts = {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts") or []}
        run = PodRun(mounts=mounts, env={}, cwd=None)
        env = {e["name"]: run.rewrite(e.get("value", "")) for e in container.get("env") or []}
        env.setdefault("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
        run.env = env
        run.cwd = run.rewrite(container["workingDir"]) if "workingDir" in container else None
        return run

    def exec_command(
        self, run: PodRun, argv: Sequence[str], *, stdin: bool
    ) -> tuple[list[str], str | None, dict[str, str] | None]:
        """How an exec in the pod runs here: its argv, working directory and environment."""
        if run.docker is not None:
            return docker_node.exec_argv(run.docker, list(argv), stdin=stdin), None, None
        return [run.rewrite(a) for a in argv], run.cwd, run.env

    async def _execute(self, namespace: str, name: str, pod: dict[str, Any], run: PodRun) -> None:
        container = pod["spec"]["containers"][0]
        image = self.images[container["image"]]
        cwd: str | None = run.cwd
        env: dict[str, str] | None = run.env
        if isinstance(image, InDocker):
            async with run.turn:
                if run.stopping:
                    return  # deleted before its container was made
                run.docker = await docker_node.create(namespace, pod)
            argv = docker_node.start_argv(namespace, name, stdin=bool(container.get("stdin")))
            cwd, env = None, None  # the Docker CLI's own
        else:
            command = container.get("command") or image
            assert command, f"the fake image {container['image']} has no CMD: give a command"
            argv = [run.rewrite(a) for a in command]
        deadline = pod["spec"].get("activeDeadlineSeconds")
        run.process = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE if container.get("stdin") else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        self._status(
            namespace,
            name,
            phase="Running",
            podIP="10.244.0.9",
            conditions=self._conditions(True),
            containerStatuses=self._container_status(pod, {"running": {"startedAt": _now()}}),
        )
        deadline_hit = False
        with run.scope:
            async with anyio.create_task_group() as pumps:
                assert run.process.stdout is not None and run.process.stderr is not None
                pumps.start_soon(self._pump, run, run.process.stdout, STDOUT)
                pumps.start_soon(self._pump, run, run.process.stderr, STDERR)
                with anyio.move_on_after(deadline if deadline is not None else float("inf")):
                    await run.process.wait()
                if run.process.returncode is None:
                    deadline_hit = True
                    _kill(run.process)
                    await run.process.wait()
                # As a container runtime does when PID 1 ends: nothing of the pod outlives it.
                _kill(run.process)
        for listener in run.listeners:
            listener.close()
        code = run.process.returncode
        if code is None:
            return  # deleted
        exit_code = 128 - code if code < 0 else code
        terminated = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "finishedAt": _now(),
        }
        extra = {"reason": "DeadlineExceeded", "message": "active deadline"} if deadline_hit else {}
        self._status(
            namespace,
            name,
            phase="Succeeded" if exit_code == 0 and not deadline_hit else "Failed",
            conditions=self._conditions(False),
            containerStatuses=self._container_status(pod, {"terminated": terminated}),
            **extra,
        )

    async def _pump(self, run: PodRun, stream: anyio.abc.ByteReceiveStream, channel: int) -> None:
        async for chunk in stream:
            run.log += chunk[: max(0, LOG_CAP - len(run.log))]
            for listener in list(run.listeners):
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await listener.send((channel, chunk))

    async def _stop(self, run: PodRun) -> None:
        async with run.turn:
            run.stopping = True
            if run.docker is not None:
                await docker_node.remove(run.docker)
        if run.process is not None:
            if run.process.returncode is None:
                _kill(run.process)
            await run.process.aclose()
        for listener in run.listeners:
            listener.close()

    async def pod_deleted(self, namespace: str, name: str) -> None:
        self.logs.pop((namespace, name), None)
        run = self.runs.get((namespace, name))
        if run is not None:
            run.scope.cancel()
            await self._stop(run)


def _kill(process: anyio.abc.Process) -> None:
    """SIGKILL every process of the pod: its session (the container's first process starts
    one; tini moves its child to a process group of its own, not out of the session)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == process.pid:  # field 6: the session id
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(stat.parent.name), 9)
