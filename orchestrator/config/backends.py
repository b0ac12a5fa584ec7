"""`[backend]`: where containers run, the local Docker engine or a Kubernetes cluster."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
)

from orchestrator.config.fields import (
    StrictModel,
    check_image,
)


class DockerBackendConfig(StrictModel):
    """`[backend] kind = "docker"` (the default): the local engine."""

    kind: Literal["docker"] = "docker"
    docker_host: str | None = None
    # The kiosks', desktops' and browser rigs' channels on a unix socket of their own
    # (docs/kiosk-internals.md, "The channel's own socket") where the engine is this
    # machine's and runs them with runc. false: always the engine's attach (say, an engine
    # that does not see this process's /tmp at the same path: a gateway under PrivateTmp).
    channel_socket: bool = True


def _namespace(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
        raise ValueError("must be a Kubernetes namespace name (1-63 of a-z, 0-9, '-')")
    return value


class KubernetesBackendConfig(StrictModel):
    """`[backend] kind = "kubernetes"`: script sandboxes (and, as far as docs/kubernetes.md
    says, kiosk sessions) as pods in one namespace of an existing cluster."""

    kind: Literal["kubernetes"]
    namespace: Annotated[str, AfterValidator(_namespace)] = "corral"
    # Unset: $KUBECONFIG, then ~/.kube/config (as kubectl).
    kubeconfig: str | None = None
    context: str | None = None
    # The names the cluster pulls; unset: the [container.*] image names.
    sandbox_image: str | None = None
    kiosk_image: str | None = None
    proxy_image: str | None = None
    browser_image: str | None = None  # the rigs' ([container.rigs])
    desktop_image: str | None = None
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    # The kiosk's Chromium seccomp profile (rig_images/kiosk/seccomp.json) installed on
    # the nodes, relative to the kubelet's seccomp root; unset: RuntimeDefault.
    kiosk_seccomp_profile: str | None = None

    @field_validator("kiosk_seccomp_profile")
    @classmethod
    def _profile(cls, value: str | None) -> str | None:
        if value is not None and (
            value.startswith("/") or ".." in value.split("/") or not value.endswith(".json")
        ):
            raise ValueError(
                "must be a path relative to the kubelet's seccomp root, ending in .json "
                "(e.g. 'corral/kiosk.json')"
            )
        return value

    @field_validator(
        "sandbox_image", "kiosk_image", "proxy_image", "browser_image", "desktop_image"
    )
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return None if value is None else check_image(value)


BackendConfig = Annotated[
    DockerBackendConfig | KubernetesBackendConfig, Field(discriminator="kind")
]
