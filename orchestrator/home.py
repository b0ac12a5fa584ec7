"""Where corral keeps its files (CORRAL_HOME, default ~/.corral) and what else it takes
from the environment. The CLI reads the environment once, into a `CorralHome`, and passes
that down; nothing below it takes a setting from `os.environ` (child processes such as
adb's server still inherit the environment)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

DEFAULT_IMAGE_TAG = "latest"
_TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DEFAULT_WARM, MAX_WARM = 1, 16  # CORRAL_WARM_DEFAULT
MAX_TRACED_FRAMES = 64  # CORRAL_TRACEMALLOC


def _warm_default(raw: str) -> int:
    if not raw:
        return DEFAULT_WARM
    if not raw.isdigit():
        raise ValueError(f"CORRAL_WARM_DEFAULT={raw!r} is not a whole number (0-{MAX_WARM})")
    return int(raw)


def _traced_frames(raw: str) -> int:
    if raw and not (raw.isdigit() and 1 <= int(raw) <= MAX_TRACED_FRAMES):
        raise ValueError(
            f"CORRAL_TRACEMALLOC={raw!r} is not a whole number of frames (1-{MAX_TRACED_FRAMES})"
        )
    return int(raw or 0)


@dataclass(frozen=True, slots=True)
class Environment:
    """The environment variables corral follows, as the CLI read them.

    `image_tag` is $CORRAL_IMAGE_TAG (default `latest`): the tag of the images corral
    builds and runs when config.toml names none, so two checkouts on one engine (two
    worktrees, a CI clone beside a developer's tree) each build and run their own images
    instead of rebuilding each other's. `docker_host` is $DOCKER_HOST (used when config.toml
    names no engine); `kubeconfig` and `user_home` are $KUBECONFIG and $HOME (where the
    Kubernetes backend looks for its kubeconfig). `operator_token` is
    $CORRAL_OPERATOR_TOKEN: the operator's credential `corral approvals` and `corral
    sessions` send (never printed: it is left out of the repr). `warm_default` is
    $CORRAL_WARM_DEFAULT (0-16, default 1): how many surfaces of a kind the gateway keeps
    started ahead where config.toml sets no `warm` for it (`sandboxes.warm_sizes`; 0 on a
    machine with little memory to spare, or a test run that starts many gateways).
    `traced_frames` is $CORRAL_TRACEMALLOC (1-64, unset: 0, off): the gateway traces its
    allocations and writes a snapshot at each SIGUSR2 (`orchestrator.gateway.memory`)."""

    image_tag: str = DEFAULT_IMAGE_TAG
    docker_host: str | None = None
    kubeconfig: str | None = None
    user_home: str | None = None
    operator_token: str | None = field(default=None, repr=False)
    warm_default: int = DEFAULT_WARM
    traced_frames: int = 0

    def __post_init__(self) -> None:
        if not _TAG_RE.fullmatch(self.image_tag):
            raise ValueError(
                f"CORRAL_IMAGE_TAG={self.image_tag!r} is not a Docker tag ([A-Za-z0-9_.-], 1-128)"
            )
        if not 0 <= self.warm_default <= MAX_WARM:
            raise ValueError(
                f"CORRAL_WARM_DEFAULT={self.warm_default} is out of range (0-{MAX_WARM})"
            )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Environment:
        return cls(
            image_tag=environ.get("CORRAL_IMAGE_TAG", DEFAULT_IMAGE_TAG),
            docker_host=environ.get("DOCKER_HOST") or None,
            kubeconfig=environ.get("KUBECONFIG") or None,
            user_home=environ.get("HOME") or None,
            operator_token=environ.get("CORRAL_OPERATOR_TOKEN", "").strip() or None,
            warm_default=_warm_default(environ.get("CORRAL_WARM_DEFAULT", "").strip()),
            traced_frames=_traced_frames(environ.get("CORRAL_TRACEMALLOC", "").strip()),
        )

    def engine_environ(self) -> dict[str, str]:
        """DOCKER_HOST, KUBECONFIG and HOME as a mapping, for choosing the backend."""
        pairs = (("DOCKER_HOST", self.docker_host), *self.kube_environ().items())
        return {name: value for name, value in pairs if value is not None}

    def kube_environ(self) -> dict[str, str]:
        """KUBECONFIG and HOME as a mapping, for `resolve_kubeconfig`."""
        pairs = (("KUBECONFIG", self.kubeconfig), ("HOME", self.user_home))
        return {name: value for name, value in pairs if value is not None}


class _Below:
    """A path below a `CorralHome`'s root, read as an attribute: `home.audit_file`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._paths: dict[Path, Path] = {}  # root -> the path (read at every call: kept)

    @overload
    def __get__(self, home: None, owner: type[CorralHome]) -> _Below: ...
    @overload
    def __get__(self, home: CorralHome, owner: type[CorralHome]) -> Path: ...
    def __get__(self, home: CorralHome | None, owner: type[CorralHome]) -> Path | _Below:
        if home is None:
            return self
        path = self._paths.get(home.root)
        if path is None:
            path = self._paths[home.root] = home.root / self.name
        return path


@dataclass(frozen=True, slots=True)
class CorralHome:
    root: Path
    env: Environment = field(default_factory=Environment)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> CorralHome:
        """CORRAL_HOME (default ~/.corral) and the rest of `Environment`, from `environ`
        (the CLI passes `os.environ`). A bad CORRAL_IMAGE_TAG raises ValueError."""
        raw = environ.get("CORRAL_HOME")
        root = Path(raw).expanduser() if raw else Path.home() / ".corral"
        return cls(root=root.resolve(), env=Environment.from_environ(environ))

    config_file = _Below("config.toml")
    agents_dir = _Below("agents")
    audit_file = _Below("audit.jsonl")
    tool_calls_file = _Below("tool_calls.jsonl")
    tokens_dir = _Below("tokens")
    # Operator names and the SHA-256 of each one's console token (never the token).
    operators_file = _Below("operators.json")
    slots_dir = _Below("slots")
    # Private per-call directories (the script mounted at /workspace) live here.
    work_dir = _Below("work")
    # The gateway's work in flight (orchestrator.ledger), closed by the next gateway.
    inflight_dir = _Below("inflight")
    # Masked recordings of sessions and rigs (orchestrator.recordings.store), owner only.
    recordings_dir = _Below("recordings")

    def agent_file(self, name: str) -> Path:
        return self.agents_dir / name / "agent.toml"

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.agents_dir.mkdir(exist_ok=True, mode=0o700)
        self.work_dir.mkdir(exist_ok=True, mode=0o700)
