"""`[container]`: the engine, the script sandbox, the kiosk and the rig images."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    field_validator,
)

from orchestrator.config.fields import HostEntry, IPv4Text, StrictModel, check_image, image_name

# The default images under the default tag; `load_config(..., image_tag=)` names the ones
# config.toml leaves unset under another tag.
DEFAULT_SANDBOX_IMAGE = image_name("sandbox")
DEFAULT_KIOSK_IMAGE = image_name("kiosk")
DEFAULT_PROXY_IMAGE = image_name("proxy")
DEFAULT_BROWSER_IMAGE = image_name("browser")
DEFAULT_DESKTOP_IMAGE = image_name("desktop")
DEFAULT_BASE_IMAGE = "corral-base:bookworm"


class SandboxConfig(StrictModel):
    """`[container.sandbox]`: the image execute_program runs in and what to do without it."""

    image: str = DEFAULT_SANDBOX_IMAGE
    base_image: str = DEFAULT_BASE_IMAGE
    script_when_unavailable: Literal["refuse", "run_unsandboxed"] = "refuse"
    tmp_size_mb: Annotated[int, Field(ge=8, le=1024)] = 64
    # Scripts at once on this host; unset: from its memory (2 GiB each) and cores.
    max_concurrent: Annotated[int | None, Field(ge=1, le=256)] = None
    # Calls that may wait for a slot in one MCP server, and for how long each.
    max_queued: Annotated[int, Field(ge=0, le=1000)] = 32
    queue_timeout_seconds: Annotated[int, Field(ge=0, le=600)] = 60
    # Script containers each `corral mcp` process keeps created ahead (0: none).
    warm: Annotated[int, Field(ge=0, le=16)] = 2
    # The engine's OCI runtime for scripts: "runsc" is gVisor (docs/security.md), which must
    # be registered with the engine (`corral doctor` says whether it is).
    runtime: Literal["runc", "runsc"] = "runc"

    _image = field_validator("image", "base_image")(check_image)


class KioskConfig(StrictModel):
    """`[container.kiosk]`: the kiosk rig and its egress proxy."""

    image: str = DEFAULT_KIOSK_IMAGE
    proxy_image: str = DEFAULT_PROXY_IMAGE
    # Extra CA certificate (PEM file) the kiosk browser trusts, e.g. a company or test CA.
    extra_ca_file: str | None = None
    # Host name -> IPv4 address, used instead of DNS when pinning (local/dev sites only).
    resolve_overrides: dict[HostEntry, IPv4Text] = Field(default_factory=dict)
    # Kiosks the gateway keeps started ahead (orchestrator/pools/kiosks.py; 0: none). Each
    # idle one holds its memory (docs/benchmarks.md), one session network and its proxy.
    # Unset: 1 if an agent may start a kiosk session ($CORRAL_WARM_DEFAULT), else 0.
    warm: Annotated[int | None, Field(ge=0, le=16)] = None

    _image = field_validator("image", "proxy_image")(check_image)


class RigsConfig(StrictModel):
    """`[container.rigs]`: the rig images (docs/rigs.md). A rig's limits, allowlist and
    deny list are the agent's [capabilities.computer_use_config], as for kiosk sessions."""

    browser_image: str = DEFAULT_BROWSER_IMAGE
    desktop_image: str = DEFAULT_DESKTOP_IMAGE
    # Rigs one agent may hold at once (one per surface), and rigs on this host at once.
    max_rigs_per_host: Annotated[int, Field(ge=1, le=64)] = 8
    # Browser and desktop rigs the gateway keeps started ahead (orchestrator/pools/warm.py;
    # 0: none). Unset: 1 if an agent may start one ($CORRAL_WARM_DEFAULT), else 0.
    browser_warm: Annotated[int | None, Field(ge=0, le=16)] = None
    desktop_warm: Annotated[int | None, Field(ge=0, le=16)] = None

    _image = field_validator("browser_image", "desktop_image")(check_image)


class ContainerConfig(StrictModel):
    """`[container]`: which backend supervises containers."""

    backend: Literal["docker"] = "docker"
    docker_host: str | None = Field(
        default=None, description="Engine address; unset means DOCKER_HOST or the local socket."
    )
    sandbox: SandboxConfig = SandboxConfig()
    kiosk: KioskConfig = KioskConfig()
    rigs: RigsConfig = RigsConfig()

    def warm_configured(self) -> dict[str, int | None]:
        """Each warm kind's configured pool size (None: unset, `sandboxes.warm_sizes`)."""
        return {
            "kiosk": self.kiosk.warm,
            "browser": self.rigs.browser_warm,
            "desktop": self.rigs.desktop_warm,
        }
