"""How many boots and captures a gateway runs at once (orchestrator/backends/admission.py;
the queue itself is tested on the real engine: tests/integration/test_admission.py)."""

from __future__ import annotations

import anyio

from orchestrator.backends.admission import FEWEST, PER_CORE, admission, slots_for


def test_slots_grow_with_the_cores_and_never_fall_below_the_floor() -> None:
    assert slots_for(2) == 2 * PER_CORE
    assert slots_for(16) == 16 * PER_CORE
    assert slots_for(1) >= FEWEST and slots_for(0) >= FEWEST


def test_each_event_loop_has_its_own_slots_and_one_loop_keeps_the_same() -> None:
    async def free_after_taking_one() -> int:
        first, again = admission(), admission()
        assert first is again
        await first.boots.acquire()  # taken in this loop only, never given back
        return first.boots.value

    one, two = anyio.run(free_after_taking_one), anyio.run(free_after_taking_one)
    assert one == two  # the second loop starts with every slot free
