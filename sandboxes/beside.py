"""Tasks that run beside a block (a heartbeat, an elicitation) and end with it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup


@asynccontextmanager
async def tasks_beside() -> AsyncIterator[TaskGroup]:
    """A task group for tasks that run beside the block: they are cancelled when it ends,
    and an error of the block comes out as itself, not inside an exception group."""
    failure: Exception | None = None
    async with anyio.create_task_group() as tasks:
        try:
            yield tasks
        except Exception as exc:
            failure = exc
        finally:
            tasks.cancel_scope.cancel()
    if failure is not None:
        raise failure
