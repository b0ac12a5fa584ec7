"""The whole of `config.toml`: `[gateway]`, `[approvals]`, `[codrive]`, `[container]`,
`[rigs]`, `[mcp]`, `[recording]` and `[backend]`."""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from pydantic import (
    Field,
)

from orchestrator.config.backends import BackendConfig, DockerBackendConfig, KubernetesBackendConfig
from orchestrator.config.container import ContainerConfig
from orchestrator.config.fields import (
    StrictModel,
    image_name,
)
from orchestrator.config.rigs import MobileRigsConfig
from orchestrator.home import DEFAULT_IMAGE_TAG

_M = TypeVar("_M", bound=StrictModel)


class GatewayConfig(StrictModel):
    host: Literal["127.0.0.1", "::1", "localhost"] = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 9030


class ApprovalsConfig(StrictModel):
    """`[approvals]`: how long a held action waits for an operator before it is denied."""

    timeout_seconds: Annotated[int, Field(ge=1, le=3600)] = 120


class CodriveConfig(StrictModel):
    """`[codrive]`: how long a run waits for a person to hand the desktop back after a
    credential step or a take over, before the run fails."""

    handoff_timeout_seconds: Annotated[int, Field(ge=5, le=3600)] = 600


class McpConfig(StrictModel):
    """`[mcp]`: how the MCP front answers. An image over `inline_image_max_bytes` comes back
    as a resource link its conversation reads with resources/read (docs/clients.md)."""

    inline_image_max_bytes: Annotated[int, Field(ge=0, le=16 * 1024 * 1024)] = 512 * 1024


class RecordingConfig(StrictModel):
    """`[recording]`: every kiosk session and rig is recorded (masked frames only) under
    `CORRAL_HOME/recordings/`, at most `fps` frames a second, taken when the screen may
    have changed; recordings older than `keep_days` go, and the oldest go first while all
    of them hold more than `max_total_mb` (docs/operator.md)."""

    enabled: bool = True
    fps: Annotated[int, Field(ge=1, le=15)] = 4
    keep_days: Annotated[int, Field(ge=1, le=3650)] = 30
    max_total_mb: Annotated[int, Field(ge=16, le=1024 * 1024)] = 2048


class CorralConfig(StrictModel):
    """The whole of `config.toml`."""

    gateway: GatewayConfig = GatewayConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    codrive: CodriveConfig = CodriveConfig()
    container: ContainerConfig = ContainerConfig()
    rigs: MobileRigsConfig = MobileRigsConfig()
    mcp: McpConfig = McpConfig()
    recording: RecordingConfig = RecordingConfig()
    # Unset: Docker at `[container] docker_host` (configs older than issue 15).
    backend: BackendConfig | None = None

    def effective_backend(self) -> DockerBackendConfig | KubernetesBackendConfig:
        """`[backend]`, or the Docker engine `[container]` names."""
        if self.backend is None:
            return DockerBackendConfig(docker_host=self.container.docker_host)
        if isinstance(self.backend, DockerBackendConfig) and self.backend.docker_host is None:
            return self.backend.model_copy(update={"docker_host": self.container.docker_host})
        return self.backend

    def cluster_images(self) -> dict[str, str]:
        """Local image name -> the name a cluster pulls (only those that differ)."""
        backend = self.backend
        if not isinstance(backend, KubernetesBackendConfig):
            return {}
        pairs = [
            (self.container.sandbox.image, backend.sandbox_image),
            (self.container.kiosk.image, backend.kiosk_image),
            (self.container.kiosk.proxy_image, backend.proxy_image),
            (self.container.rigs.browser_image, backend.browser_image),
            (self.container.rigs.desktop_image, backend.desktop_image),
        ]
        return {local: remote for local, remote in pairs if remote and remote != local}

    def with_image_tag(self, tag: str) -> CorralConfig:
        """This config with every image config.toml leaves unset named under `tag`."""
        if tag == DEFAULT_IMAGE_TAG:
            return self
        c = self.container
        update = {
            "sandbox": _retag(c.sandbox, {"image": "sandbox"}, tag),
            "kiosk": _retag(c.kiosk, {"image": "kiosk", "proxy_image": "proxy"}, tag),
            "rigs": _retag(c.rigs, {"browser_image": "browser", "desktop_image": "desktop"}, tag),
        }
        return self.model_copy(update={"container": c.model_copy(update=update)})


def _retag(model: _M, kinds: dict[str, str], tag: str) -> _M:
    unset = {name: image_name(kind, tag) for name, kind in kinds.items()}
    return model.model_copy(
        update={k: v for k, v in unset.items() if k not in model.model_fields_set}
    )
