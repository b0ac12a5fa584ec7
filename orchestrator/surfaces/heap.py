"""Give the heap memory a surface freed back to the system (issue 23 item 6).

A surface's end frees a lot at once: its recording's VP9 encoder and frames (libvpx and
Pillow, in C), its channel's buffers, its Playwright objects. glibc keeps what is freed
in its arenas (one per thread that allocated, and the encoder runs in worker threads) for
the next allocation, so without help the gateway's RSS stays at its peak long after the
sessions ended. `malloc_trim(0)` hands every arena's free pages back (it walks them
under their locks: a few milliseconds, in a worker thread, one at a time). Elsewhere
(musl, macOS) there is no such call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

import anyio


def _trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


TRIM = _trim()
_one_at_a_time = anyio.Lock()


async def give_back() -> bool:
    """Return the heap's free pages to the system; whether this libc can."""
    if TRIM is None:
        return False
    async with _one_at_a_time:
        await anyio.to_thread.run_sync(TRIM, 0)
    return True
