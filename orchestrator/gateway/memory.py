"""What holds the gateway's memory, for an operator (or `bench/soak.py`) to find out.

With `CORRAL_TRACEMALLOC=N` (1-64: the frames kept per allocation) the gateway traces
its Python allocations from its start (`tracemalloc`), and each SIGUSR2 writes a
snapshot to `CORRAL_HOME/debug/tracemalloc-K.snap` (K counts from 1), read with
`tracemalloc.Snapshot.load`: the difference of two snapshots names the lines that hold
what grew. Tracing costs the gateway time and memory, so it is off by default.
"""

from __future__ import annotations

import logging
import signal
import tracemalloc
from pathlib import Path

import anyio

logger = logging.getLogger("corral.gateway")


async def snapshots_on_signal(folder: Path, frames: int) -> None:
    """Trace allocations, and write a snapshot into `folder` at each SIGUSR2 (until
    cancelled; tracing stops then)."""
    tracemalloc.start(frames)
    try:
        with anyio.open_signal_receiver(signal.SIGUSR2) as signals:
            taken = 0
            async for _ in signals:
                taken += 1
                path = folder / f"tracemalloc-{taken}.snap"
                await anyio.to_thread.run_sync(_dump, path)
                logger.warning("corral gateway: tracemalloc snapshot written to %s", path)
    finally:
        tracemalloc.stop()


def _dump(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tracemalloc.take_snapshot().dump(str(path))
