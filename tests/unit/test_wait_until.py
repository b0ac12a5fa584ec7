"""`tests.helpers.wait_until`: the poll every Docker test waits on, and what it says when
the condition never comes."""

from __future__ import annotations

import pytest

from tests.helpers import wait_until

pytestmark = pytest.mark.anyio


async def test_returns_the_first_truthy_value() -> None:
    seen = iter([0, None, "", "ready"])
    assert await wait_until(lambda: next(seen), limit=5) == "ready"


async def test_a_timeout_without_explain_stays_a_timeout() -> None:
    with pytest.raises(TimeoutError):
        await wait_until(lambda: False, limit=0.1)


async def test_a_timeout_with_explain_says_what_was_going_on() -> None:
    with pytest.raises(AssertionError, match=r"not within 0.1 s: two containers left"):
        await wait_until(lambda: False, limit=0.1, explain=lambda: "two containers left")
