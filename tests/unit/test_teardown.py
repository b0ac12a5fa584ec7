"""closed_on_failure: a half-built session's stack is closed on failure or cancellation,
left open on success."""

from __future__ import annotations

import contextlib

import anyio
import pytest

from orchestrator.surfaces.teardown import closed_on_failure

pytestmark = pytest.mark.anyio


def tracked() -> tuple[contextlib.AsyncExitStack, list[str]]:
    closed: list[str] = []
    stack = contextlib.AsyncExitStack()

    async def close() -> None:
        await anyio.lowlevel.checkpoint()  # would be cancelled here without the shield
        closed.append("container")

    stack.push_async_callback(close)
    return stack, closed


async def test_success_leaves_the_stack_open() -> None:
    stack, closed = tracked()
    async with closed_on_failure(stack):
        pass
    assert closed == []
    await stack.aclose()
    assert closed == ["container"]


async def test_a_failing_step_closes_the_stack_and_reraises() -> None:
    stack, closed = tracked()
    with pytest.raises(RuntimeError, match="display did not start"):
        async with closed_on_failure(stack):
            raise RuntimeError("display did not start")
    assert closed == ["container"]


async def test_a_cancelled_start_still_closes_the_stack() -> None:
    stack, closed = tracked()
    with anyio.CancelScope() as scope:
        async with closed_on_failure(stack):
            scope.cancel()
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert closed == ["container"]
