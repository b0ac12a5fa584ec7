"""config.toml read again only when it changed: `CONFIGS.get(path)` is `load_config` for
callers that ask on every call (the MCP front: each forwarded call, each image answer,
each lease), at the cost of one `stat` when nothing changed. A file changed within
`RACY_SECONDS` is read every time: an edit in the same clock tick as the last read would
otherwise look unchanged. A file that cannot be used is never kept: its error is raised
again, from a fresh read, each time."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.config.corral import CorralConfig
from orchestrator.config.files import load_config
from orchestrator.home import DEFAULT_IMAGE_TAG

RACY_SECONDS = 2.0
Stamp = tuple[int, int, int, int] | None  # (inode, size, mtime_ns, ctime_ns); None: absent


def file_stamp(path: Path) -> Stamp:
    """What changes when the file does (None when it is absent)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def settled(stamps: tuple[Stamp, ...], now: float) -> bool:
    """Whether every stamped file last changed long enough ago to be kept by its stamp."""
    return all(s is None or s[2] / 1e9 < now - RACY_SECONDS for s in stamps)


class ConfigCache:
    """The last config read per (path, image tag), with the stamp it was read at."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._kept: dict[tuple[Path, str], tuple[Stamp, CorralConfig]] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, image_tag: str = DEFAULT_IMAGE_TAG) -> CorralConfig:
        stamp = file_stamp(path)  # taken before the read: a change during it is seen next
        key = (path, image_tag)
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and kept[0] == stamp:
            return kept[1]
        config = load_config(path, image_tag)  # raises ConfigError: nothing kept
        with self._lock:
            if settled((stamp,), self.clock()):
                self._kept[key] = (stamp, config)
            else:
                self._kept.pop(key, None)
        return config


CONFIGS = ConfigCache()
