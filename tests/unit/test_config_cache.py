"""config.toml read again only when it changed (`orchestrator.config.cached`: the MCP
front asks on every call)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from orchestrator.config import GatewayConfig
from orchestrator.config.cached import RACY_SECONDS, ConfigCache
from orchestrator.errors import ConfigError


def write(path: Path, text: str, age: float = 10 * RACY_SECONDS) -> None:
    path.write_text(text)
    then = time.time() - age
    os.utime(path, (then, then))


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    cache = ConfigCache()
    write(path, "[gateway]\nport = 7001\n")
    first = cache.get(path)
    assert first.gateway.port == 7001
    assert cache.get(path) is first  # one stat, the same parse
    write(path, "[gateway]\nport = 7002\n")
    assert cache.get(path).gateway.port == 7002


def test_a_file_changed_just_now_is_read_every_time(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    cache = ConfigCache()
    write(path, "[gateway]\nport = 7001\n", age=0)
    first = cache.get(path)
    assert cache.get(path) is not first  # an edit in this clock tick could look unchanged


def test_a_broken_file_is_never_kept_and_an_absent_one_is_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    cache = ConfigCache()
    assert cache.get(path).gateway.port == GatewayConfig().port  # absent: every default
    write(path, "[gateway]\nport = 'x'\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"gateway\.port"):
            cache.get(path)
    write(path, "[gateway]\nport = 7003\n")
    assert cache.get(path).gateway.port == 7003
