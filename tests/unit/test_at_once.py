"""Two pieces of work at once (orchestrator.surfaces.browser.at_once.both)."""

from __future__ import annotations

import anyio
import pytest

from orchestrator.surfaces.browser.at_once import both

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


async def test_both_answers_come_back_and_the_two_ran_at_once() -> None:
    started = anyio.Event()

    async def first() -> str:
        await started.wait()  # only the second can set it: they overlap
        return "a"

    async def second() -> int:
        started.set()
        return 2

    assert await both(first, second) == ("a", 2)


async def test_an_error_comes_out_as_it_is_and_the_other_is_cancelled() -> None:
    cancelled = anyio.Event()

    async def fails() -> None:
        raise KeyError("gone")

    async def waits() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    with pytest.raises(KeyError, match="gone"):  # not an exception group
        await both(waits, fails)
    assert cancelled.is_set()
