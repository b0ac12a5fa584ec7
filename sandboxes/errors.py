"""The root of corral's one exception tree, and the errors the sandbox kinds raise.

The whole tree, with every subclass and where it lives, is drawn in
`orchestrator/errors.py`; a unit test fails when a `CorralError` subclass is
missing from that drawing. This module is at the bottom of the layers, so the
root lives here and every other package imports it downward.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path


class CorralError(Exception):
    """Base of every error corral raises on purpose."""


class ParamError(CorralError):
    """A tool parameter is invalid. The message names the parameter and what is allowed."""


class UnavailableCode(StrEnum):
    """Why the script sandbox cannot be used. A closed set: callers may switch on it."""

    DOCKER_NOT_INSTALLED = "docker_not_installed"
    DAEMON_UNREACHABLE = "daemon_unreachable"
    PERMISSION_DENIED = "permission_denied"
    IMAGE_MISSING = "image_missing"
    INVALID_CONFIG = "invalid_config"
    ENGINE_ERROR = "engine_error"


class SandboxUnavailable(CorralError):
    """The sandbox cannot run the script; the script did not run."""

    def __init__(self, code: UnavailableCode, reason: str, fix: str) -> None:
        self.code = code
        self.reason = reason
        self.fix = fix
        super().__init__(f"Script sandbox unavailable ({code.value}): {reason}. Fix: {fix}")


class HomeUnwritable(CorralError):
    """corral cannot write what a call needs under CORRAL_HOME (a full disk, a read-only
    or removed directory): the call did nothing."""

    def __init__(self, what: str, path: Path, reason: str, *, why: str = "") -> None:
        self.path = path
        super().__init__(
            f"Nothing was done: corral cannot write {what} {path} ({reason}){why}. Fix: free "
            "space on (or make writable) the filesystem that holds it (CORRAL_HOME); corral "
            "works again as soon as it can write there, without a restart."
        )


class AuditUnavailable(HomeUnwritable):
    """The audit log cannot be written: corral does nothing it could not audit."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__("its audit log", path, reason, why=", and it does nothing it cannot audit")


class SandboxBusy(CorralError):
    """Every script slot is taken ([container.sandbox] max_concurrent) and the call could
    not wait any longer; the script did not run. The message says how many run."""


class EngineError(CorralError):
    """The container engine failed in a way that is not one of the unavailable codes."""


class SessionRefused(CorralError):
    """A session call refused by a session rule (budget, one per agent, ended, broken);
    the message says which rule and what to do next."""


class KioskError(CorralError):
    """The kiosk did not answer as it should (no answer in time, a closed channel, an
    operation it could not perform)."""


class RfbProtocolError(CorralError):
    """A VNC viewer sent what the live-view bridge cannot follow or will not pass: an
    unknown message type, a protocol version or security type it cannot read, a message
    over its bound. The bridge closes that viewer's connection."""
