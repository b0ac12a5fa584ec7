"""The gateway's malloc arenas are limited (issue 23 item 6): six threads alive at once,
each allocating, make an arena each with glibc's default and share two with the limit.
Counted by glibc itself (`malloc_stats`, one "Arena N:" line per arena), in a child
process of its own, so this test's process keeps its own arenas."""

from __future__ import annotations

import ctypes.util
import platform
import subprocess
import sys
import textwrap

import pytest

from orchestrator.surfaces.heap import GATEWAY_ARENAS, limit_arenas

pytestmark = pytest.mark.unit

CHILD = textwrap.dedent(
    """
    import ctypes, ctypes.util, sys, threading
    from orchestrator.surfaces.heap import limit_arenas
    if sys.argv[1] == "limit":
        print(limit_arenas(int(sys.argv[2]), {}), flush=True)
    held = []
    together = threading.Barrier(6)  # every thread alive while the others allocate
    def work():
        together.wait()
        held.append([bytearray(1000) for _ in range(200)])  # past pymalloc: glibc's
        together.wait()
    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctypes.CDLL(ctypes.util.find_library("c")).malloc_stats()
    """
)

glibc = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not ctypes.util.find_library("c"),
    reason="arenas are glibc's (corral's images and this machine run glibc)",
)


def arenas(*argv: str) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, check=True
    )
    count = sum(line.startswith("Arena ") for line in done.stderr.splitlines())
    return done.stdout.strip(), count


@glibc
def test_six_threads_share_the_gateways_arenas_once_limited() -> None:
    assert arenas("default") == ("", 7)  # the main thread's and one for each thread
    assert arenas("limit", str(GATEWAY_ARENAS)) == ("True", GATEWAY_ARENAS)


def test_an_operators_own_malloc_arena_max_is_kept() -> None:
    assert limit_arenas(GATEWAY_ARENAS, {"MALLOC_ARENA_MAX": "4"}) is False
