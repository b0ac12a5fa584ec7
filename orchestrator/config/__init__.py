"""Config models (pydantic) and their loaders.

`config.toml` holds the gateway, `[container]`, `[backend]` and the rigs; one
`agents/<name>/agent.toml` per AI employee holds its capabilities and
permissions. Every model forbids unknown keys so a typo is an error, and every
error names the file, the dotted key and what is allowed.

The modules: `fields` (how images are named, checked string types, the strict base
model), `container` (with the default images), `rigs`, `backends`, `corral` (config.toml
as a whole), `agent` (agent.toml and its template), `files` (reading either). Import from
here.
"""

from __future__ import annotations

from orchestrator.config.agent import (
    NEW_AGENT_TEMPLATE,
    AgentConfig,
    Capabilities,
    ComputerUseConfig,
    Permissions,
    render_new_agent,
)
from orchestrator.config.backends import (
    BackendConfig,
    DockerBackendConfig,
    KubernetesBackendConfig,
)
from orchestrator.config.container import (
    DEFAULT_BASE_IMAGE,
    DEFAULT_BROWSER_IMAGE,
    DEFAULT_DESKTOP_IMAGE,
    DEFAULT_KIOSK_IMAGE,
    DEFAULT_PROXY_IMAGE,
    DEFAULT_SANDBOX_IMAGE,
    ContainerConfig,
    KioskConfig,
    RigsConfig,
    SandboxConfig,
)
from orchestrator.config.corral import (
    ApprovalsConfig,
    CodriveConfig,
    CorralConfig,
    GatewayConfig,
    McpConfig,
    RecordingConfig,
)
from orchestrator.config.fields import (
    AGENT_NAME_RE,
    ConfirmWord,
    DenyEntry,
    HostEntry,
    IPv4Text,
    StrictModel,
    ToolPattern,
    check_image,
    image_name,
)
from orchestrator.config.files import (
    format_validation_error,
    load_agent,
    load_config,
    parse_config,
)
from orchestrator.config.rigs import (
    AndroidRigConfig,
    IosRigConfig,
    MobileRigsConfig,
)

__all__ = [
    "AGENT_NAME_RE",
    "DEFAULT_BASE_IMAGE",
    "DEFAULT_BROWSER_IMAGE",
    "DEFAULT_DESKTOP_IMAGE",
    "DEFAULT_KIOSK_IMAGE",
    "DEFAULT_PROXY_IMAGE",
    "DEFAULT_SANDBOX_IMAGE",
    "NEW_AGENT_TEMPLATE",
    "AgentConfig",
    "AndroidRigConfig",
    "ApprovalsConfig",
    "BackendConfig",
    "Capabilities",
    "CodriveConfig",
    "ComputerUseConfig",
    "ConfirmWord",
    "ContainerConfig",
    "CorralConfig",
    "DenyEntry",
    "DockerBackendConfig",
    "GatewayConfig",
    "HostEntry",
    "IPv4Text",
    "IosRigConfig",
    "KioskConfig",
    "KubernetesBackendConfig",
    "McpConfig",
    "MobileRigsConfig",
    "Permissions",
    "RecordingConfig",
    "RigsConfig",
    "SandboxConfig",
    "StrictModel",
    "ToolPattern",
    "check_image",
    "format_validation_error",
    "image_name",
    "load_agent",
    "load_config",
    "parse_config",
    "render_new_agent",
]
