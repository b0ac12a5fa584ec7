"""Two pieces of work at once, for the callers that need both answers (anyio has no
`gather`): their errors come out as they are, not wrapped in an exception group, so a
caller's `except` for one kind of error still catches it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

A = TypeVar("A")
B = TypeVar("B")


async def both(
    first: Callable[[], Awaitable[A]], second: Callable[[], Awaitable[B]]
) -> tuple[A, B]:
    """Run `first()` and `second()` at once; both answers, or the first error raised (the
    other is then cancelled)."""
    got: dict[int, Any] = {}
    failed: list[Exception] = []

    async def run(index: int, work: Callable[[], Awaitable[Any]], scope: anyio.CancelScope) -> None:
        try:
            got[index] = await work()
        except Exception as exc:  # raised below, as it is
            failed.append(exc)
            scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run, 0, first, group.cancel_scope)
        group.start_soon(run, 1, second, group.cancel_scope)
    if failed:
        raise failed[0]
    return got[0], got[1]
