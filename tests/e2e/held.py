"""The one way an e2e test waits out a held call: run the MCP call a rule holds, and once
its approval is pending (as `corral approvals list` shows it) act on it (assert on it,
look at the page, decide it with the CLI), then return the call's result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from orchestrator.home import CorralHome
from tests.e2e.conftest import wait_until
from tests.e2e.test_operators import pending


async def while_held(
    home: CorralHome,
    act: Callable[[], Awaitable[Any]],
    during: Callable[[dict[str, Any]], Awaitable[Any]],
    *,
    agent: str | None = None,
    limit: float = 30,
) -> Any:
    """Run `act`; once exactly one approval (of `agent`, or anyone's) is pending, await
    `during(approval)`; the call's result."""
    results: list[Any] = []

    async def run() -> None:
        results.append(await act())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        found: list[dict[str, Any]] = []

        async def raised() -> bool:
            found[:] = [a for a in pending(home) if agent is None or a["agent"] == agent]
            return bool(found)

        await wait_until(raised, limit=limit)
        (approval,) = found
        await during(approval)
    return results[0]
