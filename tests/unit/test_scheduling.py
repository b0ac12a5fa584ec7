"""`make test`'s scheduler (tests/scheduling.py) against xdist's own scheduling code, driven
the way xdist's controller drives it: workers added, their collections, `schedule`, then
each test's completion. The workers are stand-ins that record what they were sent (the
real three workers run it in every `make test`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.scheduling import WAITS, UnitScheduling, scheduling_unit

COLLECTION = [
    "tests/e2e/test_long_waits.py::test_a_150_s_wait",
    "tests/e2e/test_long_waits.py::test_a_cancel[stdio]",
    "tests/e2e/test_long_waits.py::test_a_cancel[http]",
    "tests/e2e/test_long_waits.py::test_a_script_waits",
    *[f"tests/integration/test_{n}.py::test_it" for n in "abcdef"],
    *[f"tests/e2e/test_computer_use.py::test_{n}" for n in "abcd"],
    *[f"tests/e2e/test_progress.py::test_{n}" for n in "abc"],
    *[f"tests/unit/test_{n}.py::test_it" for n in "abcdefgh"],
]


class Worker:
    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down, f"{self.gateway.id} was sent tests after its shutdown"
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def started(workers: int) -> tuple[UnitScheduling, list[Worker]]:
    """A scheduler of COLLECTION on `workers` workers, past its first distribution."""
    config: Any = SimpleNamespace(
        getvalue=lambda name: [f"{workers}*popen"], option=SimpleNamespace(loadscopereorder=True)
    )
    sched = UnitScheduling(config)
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
    for node in nodes:
        sched.add_node_collection(node, COLLECTION)  # type: ignore[arg-type]
    sched.schedule()
    return sched, nodes


def drain(sched: UnitScheduling, nodes: list[Worker], done: dict[str, int]) -> None:
    """Complete every test each of `nodes` was sent, in turns, as a controller would,
    until the scheduler says all tests are done (`done`: how many each has completed)."""
    while not sched.tests_finished:
        progressed = False
        for node in nodes:
            if done[node.gateway.id] < len(node.sent):
                sched.mark_test_complete(node, node.sent[done[node.gateway.id]])  # type: ignore[arg-type]
                done[node.gateway.id] += 1
                progressed = True
        assert progressed, "tests left that no worker was sent"


def run(workers: int) -> dict[str, list[str]]:
    """Schedule COLLECTION on `workers` workers and run it all; which tests each ran."""
    sched, nodes = started(workers)
    drain(sched, nodes, {node.gateway.id: 0 for node in nodes})
    ran = {node.gateway.id: [COLLECTION[i] for i in node.sent] for node in nodes}
    assert sorted(t for tests in ran.values() for t in tests) == sorted(COLLECTION)  # once each
    return ran


def test_with_three_workers_the_last_runs_the_waits_unit_and_nothing_else() -> None:
    ran = run(3)
    waits = [t for t in COLLECTION if scheduling_unit(t) == WAITS]
    assert ran["gw2"] == waits
    assert not any(scheduling_unit(t) == WAITS for t in ran["gw0"] + ran["gw1"])
    assert ran["gw0"] and ran["gw1"]  # both others share the rest


@pytest.mark.parametrize("workers", [1, 2])
def test_with_fewer_workers_the_waits_unit_is_a_unit_like_any_other(workers: int) -> None:
    ran = run(workers)
    holders = {w for w, tests in ran.items() if any(scheduling_unit(t) == WAITS for t in tests)}
    assert len(holders) == 1
    (holder,) = holders
    assert len(ran[holder]) > 4 or workers == 1  # it ran other units too


def test_every_e2e_file_outside_the_named_units_is_the_mcp_unit() -> None:
    assert scheduling_unit("tests/e2e/test_progress.py::test_a") == "tests/e2e[mcp]"
    assert scheduling_unit("tests/e2e/test_long_waits.py::test_a") == WAITS
    assert scheduling_unit("tests/integration/test_x.py::test_a") == "tests/integration"
    assert scheduling_unit("tests/unit/test_x.py::test_a") == "tests/unit/test_x.py"


def test_a_crashed_waiter_s_tests_are_run_by_another_worker() -> None:
    """xdist replaces a crashed worker: the waits unit's tests not yet run go back to the
    queue, and a worker still running takes them (never the gone one)."""
    sched, nodes = started(3)
    waiter = sched.waiter
    assert waiter is nodes[-1]
    sched.mark_test_complete(waiter, waiter.sent[0])  # one test done, then it crashes
    crashed = sched.remove_node(waiter)  # type: ignore[arg-type]
    assert crashed == COLLECTION[waiter.sent[1]]
    drain(sched, nodes[:2], {node.gateway.id: 0 for node in nodes[:2]})
    taken = [COLLECTION[i] for node in nodes[:2] for i in node.sent]
    waits = [t for t in COLLECTION if scheduling_unit(t) == WAITS]
    assert set(waits[1:]) <= set(taken)  # the three it had not run
    assert len(waiter.sent) == len(waits)  # the gone worker was sent nothing more
