"""Tasks that run beside a block (a heartbeat, an elicitation) and end with it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup


@asynccontextmanager
async def tasks_beside(ended: anyio.Event | None = None) -> AsyncIterator[TaskGroup]:
    """A task group for tasks that run beside the block: they are cancelled when it ends,
    and an error of the block comes out as itself, not inside an exception group.

    With `ended`: a block that ends well sets it instead, and its tasks, which wait on
    it, end by themselves (a cancellation formats the cancelling task's description in
    anyio, tens of microseconds at every tool call; issue 23 item 9)."""
    failure: Exception | None = None
    async with anyio.create_task_group() as tasks:
        try:
            yield tasks
        except Exception as exc:
            failure = exc
        finally:
            if ended is None or failure is not None:
                tasks.cancel_scope.cancel()
            else:
                ended.set()
    if failure is not None:
        raise failure
