"""Reading config.toml and agent.toml into their models; every problem names the file, the
dotted key and what is allowed."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)

from orchestrator.config.agent import AgentConfig
from orchestrator.config.corral import CorralConfig
from orchestrator.errors import ConfigError
from orchestrator.home import DEFAULT_IMAGE_TAG


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
