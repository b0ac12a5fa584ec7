"""The Kubernetes backend's pods: a run (`KubeRun`: the pod created from a spec, attached,
its output read and exit awaited, deleted on exit; also a kiosk's, rig's or proxy's long-lived
channel) and a process exec'd in one (`KubeExec`, the live view's relay).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.backends.kubernetes.stream import (
    ChannelStream,
    exit_code_of,
)
from orchestrator.backends.owner import LABEL_KIND, LABEL_SESSION
from orchestrator.errors import (
    EngineError,
    SandboxUnavailable,
    UnavailableCode,
)
from sandboxes.k8s_manifests import (
    CONTAINER,
    configmap_manifest,
    object_name,
    pod_manifest,
)
from sandboxes.ports import (
    ContainerSpec,
    ExitInfo,
)
from sandboxes.scoped import Scoped

if TYPE_CHECKING:
    from orchestrator.backends.kubernetes.backend import KubernetesBackend

IMAGE_ERRORS = {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
START_TIMEOUT = 120.0  # scheduling + pulling; then the run is refused
KILLED = 137


def _container_state(pod: Mapping[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    mine: dict[str, Any] = next((s for s in statuses if s.get("name") == CONTAINER), {})
    return dict(mine.get("state") or {})


class KubeRun(Scoped):
    """A pod run: `async with backend.start(spec)` (gated) or `open_attached` (not).
    Leaving, or `close`, deletes the pod and its ConfigMap, shielded."""

    def __init__(self, backend: KubernetesBackend, spec: ContainerSpec, *, gate: bool) -> None:
        self._backend = backend
        self._spec = spec
        self._gate = gate
        suffix = uuid.uuid4().hex[:8]
        session = spec.labels.get(LABEL_SESSION, "x")[:20]
        self.name = object_name(spec.labels.get(LABEL_KIND, "run"), session, suffix)
        self.id = f"pod/{self.name}"
        self._configmap: str | None = None
        self._stream: ChannelStream | None = None

    async def end(self, ok: bool) -> None:
        await self.close()

    async def open(self) -> None:
        backend, spec = self._backend, self._spec
        try:
            await backend.ensure_policy()
            if spec.mounts:
                files = await anyio.to_thread.run_sync(_read_dir, spec.mounts[0].source)
                self._configmap = self.name
                await backend.request(
                    "POST",
                    "configmaps",
                    body=configmap_manifest(
                        name=self.name,
                        namespace=backend.settings.namespace,
                        labels=spec.labels,
                        files=files,
                    ),
                )
            manifest = pod_manifest(
                spec,
                name=self.name,
                namespace=backend.settings.namespace,
                pull_policy=backend.settings.pull_policy,
                image=backend.cluster_image(spec.image),
                workspace_configmap=self._configmap,
                gate=self._gate,
                seccomp_localhost=(
                    backend.settings.seccomp_localhost
                    if any(o.startswith("seccomp=") for o in spec.security_opt)
                    else None
                ),
            )
            await backend.request("POST", "pods", body=manifest)
            await self._until_running()
            params = {"container": CONTAINER, "stdin": "true", "stdout": "true", "stderr": "true"}
            self._stream = ChannelStream(backend.target, self.name, "attach", params)
            await self._stream.open(await backend.api())
            if self._gate:
                await self._stream.send(b"go\n")
                await self._stream.close_stdin()
        except BaseException:
            await self.close()
            raise

    async def _until_running(self) -> None:
        image = self._backend.cluster_image(self._spec.image)
        with anyio.move_on_after(START_TIMEOUT):
            async with aclosing(self._backend.watch("pods", self.name)) as events:
                async for event in events:
                    if event["type"] == "DELETED":
                        raise EngineError(f"the pod {self.name} was deleted before it ran")
                    state = _container_state(event["object"])
                    reason = (state.get("waiting") or {}).get("reason")
                    if reason in IMAGE_ERRORS:
                        raise SandboxUnavailable(
                            UnavailableCode.IMAGE_MISSING,
                            f"the cluster cannot pull {image} ({reason}) in namespace "
                            f"{self._backend.settings.namespace}",
                            "corral images push REGISTRY, then set [backend] image names",
                        )
                    if "running" in state or "terminated" in state:
                        return
        raise EngineError(f"the pod {self.name} did not start within {START_TIMEOUT:.0f} s")

    async def output(self) -> AsyncIterator[bytes]:
        """The run's merged output, as the attach stream gives it. If the stream breaks
        before the server closes it, the rest comes from the pod's log once the container
        has ended (the kubelet keeps it; the attach does not replay): the bytes the stream
        already gave are skipped, so nothing is lost and nothing comes twice."""
        stream = self._stream
        if stream is None:
            return
        given = 0
        while (frame := await stream.next_frame()) is not None:
            given += len(frame[1])
            yield frame[1]
        if stream.broken is not None:
            async with aclosing(self._rest_from_log(stream.broken, given)) as rest:
                async for chunk in rest:
                    yield chunk

    async def _rest_from_log(self, broken: str, given: int) -> AsyncGenerator[bytes]:
        await self.wait()
        try:
            async with aclosing(self._backend.log_bytes(self.name, CONTAINER)) as log:
                async for chunk in log:
                    kept = chunk[given:]
                    given = max(0, given - len(chunk))
                    if kept:
                        yield kept
        except (EngineError, SandboxUnavailable) as exc:
            raise EngineError(
                f"the output stream of pod {self.name} broke ({broken}) and its log "
                f"could not be read: {exc}"
            ) from exc

    async def send(self, data: bytes) -> None:
        if self._stream is None:
            raise OSError("the pod's stream is closed")
        await self._stream.send(data)

    async def receive(self) -> bytes | None:
        return None if self._stream is None else await self._stream.receive_stdout()

    async def wait(self) -> ExitInfo:
        """The container's exit from the pod's status; a deleted pod was killed (137). A
        watch the server ends (they time out) is started again from a fresh GET."""
        while True:
            async with aclosing(self._backend.watch("pods", self.name)) as events:
                async for event in events:
                    if event["type"] == "DELETED":
                        return ExitInfo(exit_code=KILLED, oom_killed=False)
                    pod = event["object"]
                    terminated = _container_state(pod).get("terminated")
                    if terminated is not None:
                        return ExitInfo(
                            exit_code=int(terminated.get("exitCode", -1)),
                            oom_killed=terminated.get("reason") == "OOMKilled",
                        )
                    if (pod.get("status") or {}).get("reason") == "DeadlineExceeded":
                        return ExitInfo(exit_code=KILLED, oom_killed=False)

    async def kill(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._backend.remove(self.id)

    async def close(self) -> None:
        try:
            stream, self._stream = self._stream, None
            if stream is not None:
                await stream.close()
        finally:
            with anyio.CancelScope(shield=True):
                await self._backend.remove(self.id)
                if self._configmap is not None:
                    await self._backend.remove(f"configmap/{self._configmap}")
                    self._configmap = None


class KubeExec:
    """A process in a running pod over the exec WebSocket (`ExecStream`)."""

    def __init__(self, backend: KubernetesBackend, pod: str, argv: Sequence[str]) -> None:
        params = {
            "container": CONTAINER,
            "command": list(argv),
            "stdin": "true",
            "stdout": "true",
            "stderr": "true",
        }
        self._stream = ChannelStream(backend.target, pod, "exec", params)
        self._backend = backend
        self.id = f"exec-{uuid.uuid4().hex[:12]}"

    async def open(self) -> None:
        await self._stream.open(await self._backend.api())

    async def send(self, data: bytes) -> None:
        await self._stream.send(data)

    async def receive(self) -> bytes | None:
        return await self._stream.receive_stdout()

    @property
    def exit_code(self) -> int | None:
        return None if self._stream.status is None else _exit(self._stream.status)

    async def close(self) -> None:
        await self._stream.close_stdin()
        await self._stream.close()


def _exit(status: Mapping[str, Any]) -> int | None:
    return exit_code_of(status)


def _read_dir(path: str) -> dict[str, str]:
    """A script workspace's files (flat, UTF-8 text), for its ConfigMap."""
    return {
        p.name: p.read_text(encoding="utf-8") for p in sorted(Path(path).iterdir()) if p.is_file()
    }
