"""corral's one exception tree. Every `CorralError` subclass is drawn here.

    CorralError                    sandboxes.errors   base of every error raised on purpose
    ├── ParamError                 sandboxes.errors   a tool parameter out of its range
    ├── SandboxUnavailable         sandboxes.errors   the script sandbox cannot be used
    │                                                 (closed set: UnavailableCode)
    ├── SandboxBusy                sandboxes.errors   every script slot taken; try again
    ├── HomeUnwritable             sandboxes.errors   CORRAL_HOME cannot be written (a
    │   │                                             full disk): nothing was done
    │   └── AuditUnavailable       sandboxes.errors   the audit log, in particular
    ├── EngineError                sandboxes.errors   the engine failed otherwise
    │   ├── EngineNotFound         orchestrator.errors the engine has no such object (a
    │   │                                              container, network or image gone)
    │   ├── EngineConflict         orchestrator.errors the engine refused for the object's
    │   │                                              state (a removal under way, in use)
    │   └── NoSessionNetwork       orchestrator.errors every network of the engine's address
    │                                                  pools is in use: nothing was started
    ├── SessionRefused             sandboxes.errors   a session rule refused the call
    │   ├── InputInterrupted       orchestrator.errors a person took the seat mid-input
    │   │                                              (`typed`: what landed before)
    │   └── DeniedPage             orchestrator.errors a codrive step opens, or its app
    │                                                  shows, a page of the deny list
    ├── KioskError                 sandboxes.errors   the kiosk did not answer as it should
    ├── RfbProtocolError           sandboxes.errors   a VNC viewer sent what the live-view
    │                                                 bridge cannot follow or will not pass
    ├── ConfigError                orchestrator.errors a config file is unreadable or invalid
    ├── ImageBuildError            orchestrator.errors `corral images build` failed
    ├── EgressError                orchestrator.errors a session's egress could not be set up
    ├── GatewayStartError          orchestrator.errors the gateway cannot listen
    ├── NotAvailable               orchestrator.errors a listed tool this version cannot run
    ├── NotSupported               orchestrator.errors the configured backend cannot do this
    │                                                  (e.g. warm pools on Kubernetes)
    ├── KeyFileError               orchestrator.errors a secret file unusable (an agent's
    │                                                  channel key or HTTP token)
    ├── ApprovalError              orchestrator.errors an approval cannot be decided as asked
    ├── OperatorError              orchestrator.errors an operator name or token refused
    ├── SeatError                  orchestrator.errors take over / hand back not possible now
    ├── AdminError                 orchestrator.errors the gateway refused an operator's CLI
    │                                                  request, or is not running
    ├── RecordingError             orchestrator.errors no such recording, or it cannot be
    │                                                  read or exported as asked
    ├── SurfaceGone                orchestrator.errors a surface's channel failed: nothing
    │                                                  done, the surface is ended
    ├── RigError                   orchestrator.errors a rig did not start or answer as it
    │   │                                              should (its page, its channel)
    │   ├── CdpCallFailed          orchestrator.errors a CDP call of the gateway's own (the
    │   │                                              browser rig's bridge) got an error
    │   ├── DeviceError            orchestrator.errors a phone or simulator failed a call
    │   │                                              (ADB/WDA errors translated; `lost`:
    │   │                                              the device is gone, the lease ends)
    │   ├── RefGone                orchestrator.errors a browser ref names no element of the
    │   │                                              page now (take a new snapshot)
    │   └── SecretField            orchestrator.errors a codrive step would type or paste
    │                                                  into a secret field (a person does it)
    └── SigningError               orchestrator.errors the signed loopback channel
        ├── SignatureRefused       orchestrator.errors a request's signature refused (401)
        └── NonceCacheFull         orchestrator.errors too many fresh nonces (503)

The root and the errors the sandbox kinds raise live in `sandboxes.errors` (the
bottom layer: sandboxes imports no other corral package); the rest live here.
Both are re-exported from this module, so callers above import from here.

Engine errors are translated into this tree once per backend: Docker SDK and requests
exceptions only in `orchestrator.backends.docker.sdk.map_docker_errors` (every SDK call
of the Docker backend runs under it; a module that must tell a missing object from
another failure catches `EngineNotFound` or `EngineConflict`), kr8s and httpx
exceptions only in `orchestrator.backends.kubernetes.stream.map_kube_errors`. The MCP
front maps the tree to MCP answers in exactly one place: `mcp_front.errors.call_outcome`.
"""

from __future__ import annotations

from pathlib import Path

from sandboxes.errors import (
    AuditUnavailable,
    CorralError,
    EngineError,
    HomeUnwritable,
    KioskError,
    ParamError,
    RfbProtocolError,
    SandboxBusy,
    SandboxUnavailable,
    SessionRefused,
    UnavailableCode,
)

__all__ = [
    "AdminError",
    "ApprovalError",
    "AuditUnavailable",
    "ConfigError",
    "CorralError",
    "DeniedPage",
    "DeviceError",
    "EgressError",
    "EngineConflict",
    "EngineError",
    "EngineNotFound",
    "GatewayStartError",
    "HomeUnwritable",
    "ImageBuildError",
    "InputInterrupted",
    "KeyFileError",
    "KioskError",
    "NoSessionNetwork",
    "NonceCacheFull",
    "NotAvailable",
    "NotSupported",
    "OperatorError",
    "ParamError",
    "RfbProtocolError",
    "RigError",
    "SandboxBusy",
    "SandboxUnavailable",
    "SeatError",
    "SecretField",
    "SessionRefused",
    "SignatureRefused",
    "SigningError",
    "UnavailableCode",
]


class ConfigError(CorralError):
    """A config file is unreadable or invalid. Names the file, the key and what is allowed."""

    def __init__(self, file: str, problems: list[str]) -> None:
        self.file = file
        self.problems = problems
        joined = "\n  ".join(problems)
        super().__init__(f"invalid config {file}:\n  {joined}")


class ImageBuildError(CorralError):
    """Building an image failed; `log_tail` holds the last lines of the build output."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        super().__init__(message if not log_tail else f"{message}\n{log_tail}")


class EgressError(CorralError):
    """The session's egress could not be set up or torn down."""


class GatewayStartError(CorralError):
    """The gateway cannot listen where it was told to."""


class NotAvailable(CorralError):
    """The tool passed the gate but this version of corral does not execute it."""


class NotSupported(CorralError):
    """The configured backend (`[backend]`) cannot do what was asked: the thing has no
    meaning there, or is not built for it yet. Names the backend and the thing."""


class EngineNotFound(EngineError):
    """The engine has no such object: the container, network or image is gone."""


class EngineConflict(EngineError):
    """The engine refused because of the object's state: a removal already under way,
    a network still in use, a name taken."""


class NoSessionNetwork(EngineError):
    """The engine's address pools have no network left for a session's egress (Docker:
    `default-address-pools`, 256 in scripts/dockerd.json): nothing of the session was
    started. The message names the engine and what to do."""


class SigningError(CorralError):
    """The signed loopback channel between `corral mcp` and the gateway."""


class KeyFileError(CorralError):
    """A secret file in CORRAL_HOME (an agent's channel key or HTTP token) is unreadable,
    malformed, someone else's or open to others."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class SignatureRefused(SigningError):
    """The request's signature headers are missing, malformed, stale, replayed or wrong.
    `reason` is safe to return to the caller and to audit (it holds no secret)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class NonceCacheFull(SigningError):
    """Too many fresh nonces are remembered; the request is refused (503) rather than
    weakening replay protection."""


class ApprovalError(CorralError):
    """An approval cannot be decided as asked: unknown id, already decided, expired."""


class OperatorError(CorralError):
    """An operator name is invalid or taken, or an operator token is refused."""


class InputInterrupted(SessionRefused):
    """A person took the seat while a long input was being sent: what was sent before
    (`typed` characters) landed, the rest was not sent."""

    def __init__(self, message: str, *, typed: int) -> None:
        super().__init__(message)
        self.typed = typed


class SeatError(CorralError):
    """Take over, hand back or stop cannot be done now (no such session, another person
    holds the desktop, ...)."""


class RecordingError(CorralError):
    """No such recording, or it cannot be read or exported as asked."""


class SurfaceGone(CorralError):
    """The surface's channel failed (its container died, its agent stopped answering):
    nothing was done, and the surface's manager ends it and says why."""


class RigError(CorralError):
    """A rig (browser_use, computer_use) could not start, or an action on it failed."""


class RefGone(RigError):
    """A ref of corral's snapshot (`orchestrator.surfaces.browser.aria`) that names no
    element of the page now: its document changed, or the element went."""


class CdpCallFailed(RigError):
    """A CDP call the browser rig's bridge sent itself (`orchestrator.surfaces.browser.cdp`)
    was answered with an error, or its session or the bridge ended first."""


class DeviceError(RigError):
    """A mobile device (ADB) or simulator (WebDriverAgent, simctl) failed a call. With
    `lost` true the device is offline, unauthorized or unreachable: the rig ends and its
    lease is released."""

    def __init__(self, message: str, *, lost: bool = False) -> None:
        self.lost = lost
        super().__init__(message)


class AdminError(CorralError):
    """The gateway refused an operator's CLI request, or could not be reached."""


class DeniedPage(SessionRefused):
    """A codrive step opens, or its app shows, a page or window of the deny list."""


class SecretField(RigError):
    """A codrive step would type or paste into a secret field: a person must do it."""
