"""[container.sandbox] max_concurrent: at most N scripts at once on the host, callers
served in order, a clear "busy" once the bounds are reached. The same limiter under real
MCP load: tests/e2e/test_mcp_front.py::test_scripts_beyond_the_limit_wait_or_are_busy..."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from orchestrator.errors import SandboxBusy
from orchestrator.pools.slots import GiB, ScriptSlots, default_max_concurrent

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


def slots(directory: Path, limit: int = 1, queued: int = 8, wait: float = 30) -> ScriptSlots:
    return ScriptSlots(directory, limit, max_queued=queued, queue_timeout_seconds=wait)


@pytest.mark.parametrize(
    ("memory", "cores", "expected"),
    [(24 * GiB, 2, 8), (8 * GiB, 16, 3), (3 * GiB, 4, 1), (1 * GiB, 1, 1), (512 * GiB, 4, 16)],
)
def test_the_default_fits_memory_and_cores(memory: int, cores: int, expected: int) -> None:
    assert default_max_concurrent(memory, cores) == expected


async def test_callers_beyond_the_limit_are_served_in_arrival_order(tmp_path: Path) -> None:
    limiter = slots(tmp_path, limit=1)
    order: list[int] = []
    release = anyio.Event()

    async def call(n: int, entered: anyio.Event) -> None:
        entered.set()
        async with limiter.slot():
            order.append(n)
            if n == 0:
                await release.wait()

    async with anyio.create_task_group() as tg:
        for n in range(5):
            entered = anyio.Event()
            tg.start_soon(call, n, entered)
            await entered.wait()
            await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(10):  # the first holder may still be taking its lock file
            while order != [0]:
                assert not order or order[0] == 0, order
                await anyio.sleep(0.01)
        release.set()

    assert order == [0, 1, 2, 3, 4]


async def test_a_full_queue_answers_busy_at_once_saying_how_many_run(tmp_path: Path) -> None:
    limiter = slots(tmp_path, limit=2, queued=1)
    release = anyio.Event()

    async def hold() -> None:
        async with limiter.slot():
            await release.wait()

    async with anyio.create_task_group() as tg:
        for _ in range(3):  # two run, one waits
            tg.start_soon(hold)
        # Not wait_all_tasks_blocked: a holder still taking its host slot (a lock file, in a
        # worker thread) counts as blocked before it counts as running.
        with anyio.fail_after(10):
            while limiter.running < 2 or limiter._semaphore.statistics().tasks_waiting < 1:
                await anyio.sleep(0.01)
        with pytest.raises(SandboxBusy) as caught:
            async with limiter.slot():
                pytest.fail("a fourth call got a slot")
        release.set()

    message = str(caught.value)
    assert message.startswith("busy: 2 script(s) running")
    assert "max_concurrent" in message and "1 more are already waiting" in message


async def test_a_caller_waits_at_most_the_queue_timeout(tmp_path: Path) -> None:
    limiter = slots(tmp_path, limit=1, wait=0.2)
    release = anyio.Event()

    async def hold() -> None:
        async with limiter.slot():
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(SandboxBusy, match=r"this call waited 0\.2 s"):
            async with limiter.slot():
                pytest.fail("got a slot that was held")
        release.set()


async def test_the_limit_holds_across_processes_through_the_slot_files(tmp_path: Path) -> None:
    """Two limiters on one directory stand for two processes: flock locks belong to open
    files, so the second cannot take the slot the first holds."""
    first, second = slots(tmp_path, limit=1), slots(tmp_path, limit=1, wait=0.3)
    async with first.slot():
        with pytest.raises(SandboxBusy, match="taken by other corral processes"):
            async with second.slot():
                pytest.fail("two processes ran over a limit of one")
    async with second.slot():
        assert second.running == 1
    assert second.running == 0
