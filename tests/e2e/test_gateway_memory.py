"""What holds the gateway's memory, for an operator to find out (issue 23 item 6): a
gateway started with CORRAL_TRACEMALLOC writes a tracemalloc snapshot at each SIGUSR2."""

from __future__ import annotations

import os
import pickle
import signal
import tracemalloc
from pathlib import Path

import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import wait_until
from tests.e2e.gateways import running_gateway

pytestmark = [pytest.mark.anyio]


def _loaded(path: Path) -> tracemalloc.Snapshot | None:
    try:
        return tracemalloc.Snapshot.load(str(path))
    except (FileNotFoundError, EOFError, pickle.UnpicklingError):
        return None  # not written yet, or still being written


async def test_a_traced_gateway_writes_a_snapshot_at_each_sigusr2(corral_home: CorralHome) -> None:
    async with running_gateway(corral_home, environ={"CORRAL_TRACEMALLOC": "5"}) as (_, pid):
        for taken in (1, 2):
            os.kill(pid, signal.SIGUSR2)
            path = corral_home.root / "debug" / f"tracemalloc-{taken}.snap"
            snapshot = await wait_until(lambda path=path: _loaded(path))
            assert snapshot.traceback_limit == 5
            stats = snapshot.statistics("filename")
            assert any("orchestrator" in s.traceback[0].filename for s in stats)
        assert (corral_home.root / "debug").stat().st_mode & 0o777 == 0o700


async def test_a_bad_frame_count_is_refused_naming_the_variable(corral_home: CorralHome) -> None:
    import subprocess

    from tests.helpers import corral_bin, env_with_home

    for bad in ("0", "65", "lots"):
        done = subprocess.run(
            [corral_bin(), "gateway"],
            env={**env_with_home(corral_home), "CORRAL_TRACEMALLOC": bad},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0
        assert "CORRAL_TRACEMALLOC" in done.stderr and "1-64" in done.stderr, done.stderr
