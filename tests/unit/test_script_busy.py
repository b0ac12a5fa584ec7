"""execute_program when every slot is taken: the call is refused as busy and audited
(`script_busy`), on the cold path and the pooled one alike, before any container starts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from sandboxes.errors import SandboxBusy
from sandboxes.script import ScriptContext, ScriptSettings, execute_program
from sandboxes.script_policy import parse_params

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class Full:
    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        raise SandboxBusy("2 scripts are running and 8 wait; try again later")
        yield  # pragma: no cover


class Backend:
    def __init__(self) -> None:
        self.started: list[Any] = []

    async def check(self, image: str) -> None:
        return None

    def labels(self, **what: str) -> dict[str, str]:
        return dict(what)

    def start(self, spec: Any) -> Any:
        self.started.append(spec)
        raise AssertionError("no container may start when the call is busy")


class Pool:
    def __init__(self) -> None:
        self.claims = 0

    async def claim(self) -> None:
        self.claims += 1
        return None


class Audit:
    def __init__(self) -> None:
        self.events: list[tuple[str, Mapping[str, Any]]] = []

    def record(self, event: str, agent: str | None, details: Mapping[str, Any]) -> None:
        self.events.append((event, details))


@pytest.mark.parametrize("pooled", [False, True])
async def test_a_busy_call_is_audited_and_nothing_starts(tmp_path: Path, pooled: bool) -> None:
    audit, pool, backend = Audit(), Pool(), Backend()
    ctx = ScriptContext(
        backend=backend,  # type: ignore[arg-type]
        audit=audit,
        work_dir=tmp_path,
        sandbox=ScriptSettings(image="corral-sandbox:latest", tmp_size_mb=64),
        agent="alice",
        slots=Full(),
        pool=pool if pooled else None,
    )
    with pytest.raises(SandboxBusy, match="2 scripts are running"):
        await execute_program(parse_params({"language": "python", "code": "print(1)"}), ctx)
    assert audit.events == [
        ("script_busy", {"reason": "2 scripts are running and 8 wait; try again later"})
    ]
    assert backend.started == [] and pool.claims == 0
