"""How `make test` shares the suite among its pytest-xdist workers (tests/conftest.py's
`pytest_xdist_make_scheduler`).

Units of work (`scheduling_unit`), each run in order in one worker, biggest first: tests/
integration is one (its tests share images and agent names), tests/e2e four, each unit
test file its own. Two workers run the units; a third, when there is one, runs only
`WAITS`: tests that spend minutes waiting on time itself (a 150 s approval wait) and use
almost no CPU, so that two busy workers keep working beside it instead of one."""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

# tests/e2e in units that may run side by side: what each starts for agent "alice" (kiosk
# sessions; browser and desktop rigs) is counted by agent name within one unit only, and
# the tests that assert on a killed gateway's leftovers before `corral reap` are in the
# kiosk unit (test_warm_pools.py, test_computer_use.py). Script containers are counted by
# their owner's pid (test_mcp_front.py), so the waits unit's script may run beside them.
E2E_UNITS = {
    "kiosk": (
        "test_computer_use.py",
        "test_operators.py",
        "test_console_browser.py",
        "test_console_auth.py",
        "test_gateway_stop.py",
        "test_warm_pools.py",
    ),
    "rigs": (
        "test_browser_use.py",
        "test_codrive.py",
        "test_desktop_rig.py",
        "test_mobile_use.py",
        "test_rules_everywhere.py",
    ),
    "waits": ("test_long_waits.py",),  # simulated phones, and one script of alice's
}  # every other e2e file: the "mcp" unit
WAITS = "tests/e2e[waits]"


def scheduling_unit(nodeid: str) -> str:
    """The unit of work a test belongs to (see the module's docstring)."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tests":
        return path
    if parts[1] == "integration":
        return "tests/integration"
    if parts[1] == "e2e":
        unit = next((u for u, files in E2E_UNITS.items() if parts[-1] in files), "mcp")
        return f"tests/e2e[{unit}]"
    return path


class UnitScheduling(LoadScopeScheduling):
    """xdist's scheduling by scope, the scopes being `scheduling_unit`'s, with the waits
    unit on a worker of its own when there are three or more: the last worker takes it
    first and nothing else (it shuts down once it has run it), the others never take it.
    With fewer workers (or without the unit) it is a unit like any other.

    Built on `LoadScopeScheduling`'s `_assign_work_unit`, which its scheduling calls
    whenever a worker may take a unit (at the start, and once two or fewer of a worker's
    tests are left); xdist's own `loadgroup` cannot regroup pytest 9.2's node ids."""

    waiter: Any = None  # the worker running the waits unit

    def _split_scope(self, nodeid: str) -> str:
        return scheduling_unit(nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        if self.waiter is None and WAITS in self.workqueue and len(self.nodes) >= 3:
            self.waiter = self.nodes[-1]
        if self.waiter is not None and WAITS in self.workqueue:
            self.workqueue.move_to_end(WAITS, last=False)
            super()._assign_work_unit(self.waiter)
        if node is self.waiter:
            node.shutdown()  # it ends once the tests it holds have run
        elif self.workqueue:
            super()._assign_work_unit(node)

    def remove_node(self, node: Any) -> str | None:
        """A worker gone; a crashed waiter's tests go back to the queue (xdist's own), and
        the next waiter is whichever worker is last when they are handed out again."""
        if node is self.waiter:
            self.waiter = None
        return super().remove_node(node)
