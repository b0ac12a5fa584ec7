"""Undo a half-built session or rig: what a start step entered is closed if a later one fails."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio


@contextlib.asynccontextmanager
async def closed_on_failure(stack: contextlib.AsyncExitStack) -> AsyncIterator[None]:
    """On any failure or cancellation inside the block, close `stack` (shielded, so a
    cancelled start still removes its containers and networks) and re-raise. On success
    the stack stays open: the session or rig that owns it closes it when it ends."""
    try:
        yield
    except BaseException:
        with anyio.CancelScope(shield=True):
            await stack.aclose()
        raise
