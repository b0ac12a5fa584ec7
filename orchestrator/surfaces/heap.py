"""Give the heap memory a surface freed back to the system (issue 23 item 6).

A surface's end frees a lot at once: its masked frames (Pillow, in C), its channel's
buffers, its Playwright objects (its recording's VP9 encoder is a process of its own,
`orchestrator.recordings.encoder`). glibc keeps what is freed in its arenas (one per
thread that allocated, and the screenshots' masking runs in worker threads) for
the next allocation, so without help the gateway's RSS stays at its peak long after the
sessions ended. `malloc_trim(0)` hands every arena's free pages back (it walks them
under their locks: a few milliseconds, in a worker thread, one at a time). Elsewhere
(musl, macOS) there is no such call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from collections.abc import Callable, Mapping

import anyio

# glibc's mallopt parameter for the number of arenas (malloc.h: M_ARENA_MAX is -8)
M_ARENA_MAX = -8
# The gateway's arenas: glibc makes up to 8 per core, one for each thread that allocates
# while the others live. The gateway's worker threads (the screenshots' masking, then the
# recordings' encoding too) each filled one and left it fragmented: on a soak at 47 actions/s
# its memory settled 17.6-27.9 MiB above its start in six runs with glibc's default, and
# 11.7-14.5 in three with two arenas, clicks no slower (docs/benchmarks.md).
GATEWAY_ARENAS = 2


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _trim() -> Callable[[int], int] | None:
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim  # type: ignore[no-any-return]


TRIM = _trim()


def limit_arenas(count: int, environ: Mapping[str, str] = os.environ) -> bool:
    """At most `count` malloc arenas from now on (call it before threads start); whether
    it was set. An operator's own MALLOC_ARENA_MAX (read by glibc at start) is kept, and
    elsewhere (musl, macOS) there is no such setting."""
    if "MALLOC_ARENA_MAX" in environ:
        return False
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, count))


_one_at_a_time = anyio.Lock()


async def give_back() -> bool:
    """Return the heap's free pages to the system; whether this libc can."""
    if TRIM is None:
        return False
    async with _one_at_a_time:
        await anyio.to_thread.run_sync(TRIM, 0)
    return True
