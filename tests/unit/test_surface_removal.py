"""A surface whose removal the engine refuses still ends: its manager says what failed in
the end's audit line instead of failing the call that ended it (a loaded run's fault test
got "internal error in the gateway" from a session ended at the next call)."""

from __future__ import annotations

import contextlib
import time

import pytest

from orchestrator.config import ComputerUseConfig
from orchestrator.errors import EngineConflict
from orchestrator.surfaces.base import Surface, fresh_clock
from orchestrator.surfaces.manager import SurfaceManager

pytestmark = pytest.mark.anyio


async def test_a_refused_removal_is_told_not_raised() -> None:
    closed: list[str] = []

    async def proxy_gone() -> None:
        closed.append("proxy")

    async def refused() -> None:
        raise EngineConflict("removal of container k1 is already in progress")

    stack = contextlib.AsyncExitStack()
    stack.push_async_callback(proxy_gone)
    stack.push_async_callback(refused)
    surface = Surface(
        id="k1", agent="ann", clock=fresh_clock(ComputerUseConfig(), time.monotonic())
    )
    surface.stack = stack
    failed = await SurfaceManager.removed(None, surface)  # type: ignore[arg-type]
    assert failed == {"removal_failed": "removal of container k1 is already in progress"}
    assert closed == ["proxy"]  # the rest was still removed
