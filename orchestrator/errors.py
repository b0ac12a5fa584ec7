"""Errors raised by the orchestrator package.

    CorralError
    ├── ConfigError            a config file is missing a key, has a bad value or is not TOML
    ├── SandboxUnavailable     the script sandbox cannot be used (closed set of codes)
    ├── ImageBuildError        `corral images build` failed
    └── EngineError            the container engine answered with an unexpected error

Docker SDK exceptions are translated into this tree in exactly one place:
`orchestrator.docker_backend.map_docker_errors`.
"""

from __future__ import annotations

from enum import StrEnum


class CorralError(Exception):
    """Base of every error corral raises on purpose."""


class ConfigError(CorralError):
    """A config file is unreadable or invalid. Names the file, the key and what is allowed."""

    def __init__(self, file: str, problems: list[str]) -> None:
        self.file = file
        self.problems = problems
        joined = "\n  ".join(problems)
        super().__init__(f"invalid config {file}:\n  {joined}")


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


class ImageBuildError(CorralError):
    """Building an image failed; `log_tail` holds the last lines of the build output."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        super().__init__(message if not log_tail else f"{message}\n{log_tail}")


class EngineError(CorralError):
    """The container engine failed in a way that is not one of the unavailable codes."""
