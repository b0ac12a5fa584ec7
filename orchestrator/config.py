"""Config models (pydantic) and their loaders.

`config.toml` holds the gateway, `[container]`, `[backend]` and the rigs; one
`agents/<name>/agent.toml` per AI employee holds its capabilities and
permissions. Every model forbids unknown keys so a typo is an error, and every
error names the file, the dotted key and what is allowed.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.errors import ConfigError
from orchestrator.home import DEFAULT_IMAGE_TAG
from sandboxes.approval_rules import DEFAULT_CONFIRM_WORDS, word_problem
from sandboxes.hostnames import deny_entry_problem, host_entry_problem
from sandboxes.visibility import pattern_problem


def image_name(kind: str, tag: str = DEFAULT_IMAGE_TAG) -> str:
    """The image corral builds and runs for `kind` under `tag` (`CorralHome.env.image_tag`:
    `latest`, or $CORRAL_IMAGE_TAG as the CLI read it)."""
    return f"corral-{kind}:{tag}"


# The default images under the default tag; `load_config(..., image_tag=)` names the ones
# config.toml leaves unset under another tag.
DEFAULT_SANDBOX_IMAGE = image_name("sandbox")
DEFAULT_KIOSK_IMAGE = image_name("kiosk")
DEFAULT_PROXY_IMAGE = image_name("proxy")
DEFAULT_BROWSER_IMAGE = image_name("browser")
DEFAULT_DESKTOP_IMAGE = image_name("desktop")
DEFAULT_BASE_IMAGE = "corral-base:bookworm"

# A Docker image reference: [registry/]name[:tag][@digest], lower-case repository.
_IMAGE_RE = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[a-f0-9]{64})?$"
)
AGENT_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


def _host_entry(value: str) -> str:
    problem = host_entry_problem(value)
    if problem is not None:
        raise ValueError(
            f"the host name {problem}" if problem.startswith(("must", "is ")) else problem
        )
    return value


def _deny_entry(value: str) -> str:
    problem = deny_entry_problem(value)
    if problem is not None:
        raise ValueError(f"the entry {problem}" if problem.startswith(("must", "is ")) else problem)
    return value


def _confirm_word(value: str) -> str:
    problem = word_problem(value)
    if problem is not None:
        raise ValueError(f"the confirm word {problem}")
    return value


def _ipv4(value: str) -> str:
    try:
        address = ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError("must be an IPv4 address such as '172.18.0.5'") from None
    if str(address) != value:
        raise ValueError(f"write the address as {str(address)!r}")
    return value


def _tool_pattern(value: str) -> str:
    problem = pattern_problem(value)
    if problem is not None:
        raise ValueError(f"the pattern can never match a corral tool: {problem}")
    return value


HostEntry = Annotated[str, AfterValidator(_host_entry)]
ToolPattern = Annotated[str, AfterValidator(_tool_pattern)]
DenyEntry = Annotated[str, AfterValidator(_deny_entry)]
IPv4Text = Annotated[str, AfterValidator(_ipv4)]
ConfirmWord = Annotated[str, AfterValidator(_confirm_word)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_M = TypeVar("_M", bound=_Model)


def _check_image(value: str) -> str:
    if not _IMAGE_RE.fullmatch(value):
        raise ValueError(
            "must be a Docker image reference such as 'corral-sandbox:latest' "
            "(lower-case name, optional :tag)"
        )
    return value


class SandboxConfig(_Model):
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

    _image = field_validator("image", "base_image")(_check_image)


class KioskConfig(_Model):
    """`[container.kiosk]`: the kiosk rig and its egress proxy."""

    image: str = DEFAULT_KIOSK_IMAGE
    proxy_image: str = DEFAULT_PROXY_IMAGE
    # Extra CA certificate (PEM file) the kiosk browser trusts, e.g. a company or test CA.
    extra_ca_file: str | None = None
    # Host name -> IPv4 address, used instead of DNS when pinning (local/dev sites only).
    resolve_overrides: dict[HostEntry, IPv4Text] = Field(default_factory=dict)
    # Kiosks the gateway keeps started ahead (orchestrator/pools/kiosks.py; 0: none). Each
    # idle one holds its memory (docs/benchmarks.md) and one session network.
    warm: Annotated[int, Field(ge=0, le=16)] = 0

    _image = field_validator("image", "proxy_image")(_check_image)


class RigsConfig(_Model):
    """`[container.rigs]`: the rig images (docs/rigs.md). A rig's limits, allowlist and
    deny list are the agent's [capabilities.computer_use_config], as for kiosk sessions."""

    browser_image: str = DEFAULT_BROWSER_IMAGE
    desktop_image: str = DEFAULT_DESKTOP_IMAGE
    # Rigs one agent may hold at once (one per surface), and rigs on this host at once.
    max_rigs_per_host: Annotated[int, Field(ge=1, le=64)] = 8

    _image = field_validator("browser_image", "desktop_image")(_check_image)


class ContainerConfig(_Model):
    """`[container]`: which backend supervises containers."""

    backend: Literal["docker"] = "docker"
    docker_host: str | None = Field(
        default=None, description="Engine address; unset means DOCKER_HOST or the local socket."
    )
    sandbox: SandboxConfig = SandboxConfig()
    kiosk: KioskConfig = KioskConfig()
    rigs: RigsConfig = RigsConfig()


_SERIAL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HOST_PORT_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.-]{0,252}):([0-9]{1,5})$")
_UDID_RE = re.compile(
    r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
)


def _device_entry(value: str) -> str:
    match = _HOST_PORT_RE.fullmatch(value)
    if match is not None:
        if not 1 <= int(match.group(2)) <= 65535:
            raise ValueError(f"{value!r}: the port must be 1-65535")
        return value
    if not _SERIAL_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is neither a device serial (letters, digits, . _ -) nor HOST:PORT"
        )
    return value


def _absolute_dir(value: str | None) -> str | None:
    if value is not None and not Path(value).is_absolute():
        raise ValueError("must be an absolute directory path")
    return value


class AndroidRigConfig(_Model):
    """`[rigs.android]`: the devices mobile_use may lease (docs/rigs.md). A serial is a
    device the adb server sees (USB); HOST:PORT is connected with `adb connect`."""

    devices: list[Annotated[str, AfterValidator(_device_entry)]] = Field(
        default_factory=list, max_length=64
    )
    # The only directory `mobile_use install` takes APKs from (by file name).
    apk_dir: Annotated[str | None, AfterValidator(_absolute_dir)] = None
    # The port of corral's own adb server (loopback); unset: a free port. Never 5037,
    # the port of the user's own adb server.
    adb_port: Annotated[int | None, Field(ge=1024, le=65535)] = None
    timeout_seconds: Annotated[int, Field(ge=1, le=600)] = 30

    @field_validator("devices")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a device is listed twice")
        return value

    @field_validator("adb_port")
    @classmethod
    def _private(cls, value: int | None) -> int | None:
        if value == 5037:
            raise ValueError("5037 is the default adb server's port; corral runs its own")
        return value


class IosRigConfig(_Model):
    """`[rigs.ios]`: the WebDriverAgent ios_use drives and the simulator it runs in."""

    wda_url: str | None = None
    simulator_udid: str | None = None
    # The only directory `ios_use install` takes .app/.ipa bundles from (by name).
    app_dir: Annotated[str | None, AfterValidator(_absolute_dir)] = None
    timeout_seconds: Annotated[int, Field(ge=1, le=600)] = 30

    @field_validator("wda_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(
            r"https?://[A-Za-z0-9.\[\]:-]+(:[0-9]{1,5})?/?", value
        ):
            raise ValueError("must be http(s)://HOST:PORT, e.g. 'http://127.0.0.1:8100'")
        return value.rstrip("/") if value else value

    @field_validator("simulator_udid")
    @classmethod
    def _udid(cls, value: str | None) -> str | None:
        if value is not None and not _UDID_RE.fullmatch(value):
            raise ValueError("must be a simulator UDID (8-4-4-4-12 hex digits)")
        return value


class MobileRigsConfig(_Model):
    """`[rigs]`: the devices of the mobile rigs (docs/rigs.md)."""

    android: AndroidRigConfig = AndroidRigConfig()
    ios: IosRigConfig = IosRigConfig()


class DockerBackendConfig(_Model):
    """`[backend] kind = "docker"` (the default): the local engine."""

    kind: Literal["docker"] = "docker"
    docker_host: str | None = None


def _namespace(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
        raise ValueError("must be a Kubernetes namespace name (1-63 of a-z, 0-9, '-')")
    return value


class KubernetesBackendConfig(_Model):
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

    @field_validator("sandbox_image", "kiosk_image", "proxy_image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return None if value is None else _check_image(value)


BackendConfig = Annotated[
    DockerBackendConfig | KubernetesBackendConfig, Field(discriminator="kind")
]


class GatewayConfig(_Model):
    host: Literal["127.0.0.1", "::1", "localhost"] = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 9030


class ApprovalsConfig(_Model):
    """`[approvals]`: how long a held action waits for an operator before it is denied."""

    timeout_seconds: Annotated[int, Field(ge=1, le=3600)] = 120


class CodriveConfig(_Model):
    """`[codrive]`: how long a run waits for a person to hand the desktop back after a
    credential step or a take over, before the run fails."""

    handoff_timeout_seconds: Annotated[int, Field(ge=5, le=3600)] = 600


class CorralConfig(_Model):
    """The whole of `config.toml`."""

    gateway: GatewayConfig = GatewayConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    codrive: CodriveConfig = CodriveConfig()
    container: ContainerConfig = ContainerConfig()
    rigs: MobileRigsConfig = MobileRigsConfig()
    # Unset: Docker at `[container] docker_host` (configs older than issue 15).
    backend: BackendConfig | None = None

    def effective_backend(self) -> DockerBackendConfig | KubernetesBackendConfig:
        """`[backend]`, or the Docker engine `[container]` names."""
        if self.backend is None:
            return DockerBackendConfig(docker_host=self.container.docker_host)
        if isinstance(self.backend, DockerBackendConfig) and self.backend.docker_host is None:
            return DockerBackendConfig(docker_host=self.container.docker_host)
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


class ComputerUseConfig(_Model):
    max_actions: Annotated[int, Field(ge=1, le=10_000)] = 50
    # Host names computer_navigate may open, exactly (a subdomain is its own entry).
    allowed_domains: list[HostEntry] = Field(default_factory=list)
    # Pages whose screenshots are fully masked: host names (subdomains included) or URL prefixes.
    deny_list: list[DenyEntry] = Field(default_factory=list)
    idle_timeout_seconds: Annotated[int, Field(ge=5, le=3600)] = 600
    max_lifetime_seconds: Annotated[int, Field(ge=10, le=86_400)] = 3600
    # Pages whose opening waits for an operator (written like deny-list entries).
    confirm_urls: list[DenyEntry] = Field(default_factory=list, max_length=200)
    # A click whose target's accessible name contains one of these waits for an operator.
    confirm_words: list[ConfirmWord] = Field(
        default_factory=lambda: list(DEFAULT_CONFIRM_WORDS), max_length=200
    )


class Capabilities(_Model):
    """`[capabilities]`: every optional family is off for a new agent."""

    computer_use: bool = False
    codrive: bool = False
    browser_use: bool = False
    desktop_use: bool = False  # the desktop rig's computer_use tool (not the kiosk family)
    mobile_use: bool = False
    ios_use: bool = False
    read_only: bool = False
    # Tool patterns: a name, `mcp__corral__<name>`, or either ending in `*` (SPEC S5.2).
    allowed_tools: list[ToolPattern] = Field(default_factory=list)
    denied_tools: list[ToolPattern] = Field(default_factory=list)
    scoped_tools: list[ToolPattern] = Field(default_factory=list)
    computer_use_config: ComputerUseConfig = ComputerUseConfig()

    @model_validator(mode="before")
    @classmethod
    def _drop_os_native(cls, data: Any) -> Any:
        # `os_native` gated no tool and is gone; agent files written before (the template
        # had `os_native = false`) still load.
        if isinstance(data, dict) and "os_native" in data:
            return {k: v for k, v in data.items() if k != "os_native"}
        return data


class Permissions(_Model):
    """`[permissions]`: listed-but-refused gates. Everything is allowed unless turned off."""

    execute_program: bool = True


class AgentConfig(_Model):
    """The whole of `agents/<name>/agent.toml`."""

    name: str
    display_name: str = ""
    capabilities: Capabilities = Capabilities()
    permissions: Permissions = Permissions()

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not AGENT_NAME_RE.fullmatch(value):
            raise ValueError(
                "must be 1-63 characters: a lower-case letter, then lower-case letters, "
                "digits, '-' or '_'"
            )
        return value


def format_validation_error(exc: ValidationError) -> list[str]:
    """One line per problem: `key 'a.b': what is wrong (got ...)`."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"]) or "(top level)"
        message = err["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if err["type"] == "extra_forbidden":
            message = "unknown key (check the spelling; see docs/operator.md for the keys)"
            lines.append(f"key '{key}': {message}")
            continue
        if err["type"] == "missing":
            lines.append(f"key '{key}': required but missing")
            continue
        got = err.get("input")
        lines.append(f"key '{key}': {message} (got {got!r})")
    return lines


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), [f"not valid TOML: {exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            str(path), [f"not valid UTF-8: {exc.reason} at byte {exc.start}"]
        ) from exc
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot be read: {exc.strerror}"]) from exc


def parse_config(data: Mapping[str, Any], source: str) -> CorralConfig:
    try:
        return CorralConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(source, format_validation_error(exc)) from exc


def load_config(path: Path, image_tag: str = DEFAULT_IMAGE_TAG) -> CorralConfig:
    """Read `config.toml`; a missing file means every default. Images it leaves unset are
    corral's own under `image_tag` (`home.env.image_tag`)."""
    if not path.exists():
        return CorralConfig().with_image_tag(image_tag)
    return parse_config(_read_toml(path), str(path)).with_image_tag(image_tag)


def load_agent(path: Path) -> AgentConfig:
    """Read one `agent.toml`; the file must exist."""
    data = _read_toml(path)
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(str(path), format_validation_error(exc)) from exc


NEW_AGENT_TEMPLATE = """\
# corral agent: {name}
# Every optional capability is off. Turn one on by setting it to true;
# see docs/operator.md for what each one allows.
name = "{name}"
display_name = ""

[capabilities]
computer_use = false
codrive = false
browser_use = false
desktop_use = false
mobile_use = false
ios_use = false
read_only = false
allowed_tools = []
denied_tools = []
scoped_tools = []

[capabilities.computer_use_config]
max_actions = 50
allowed_domains = []

[permissions]
execute_program = true
"""


def render_new_agent(name: str) -> str:
    text = NEW_AGENT_TEMPLATE.format(name=name)
    # The template must itself be valid: a test relies on this round trip.
    AgentConfig.model_validate(tomllib.loads(text))
    return text
