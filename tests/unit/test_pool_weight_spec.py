"""A warm pool member is created at the pool's CPU weight (`sandboxes.isolation`), a
session's surface at the engine's default: what `pool_spec` and `create_kwargs` make of
it. The claim's reweighing: tests/unit/test_warm_settle.py; on the real engine:
tests/integration/test_kiosk_pool.py (the weight read back from the container)."""

from __future__ import annotations

from types import SimpleNamespace

from orchestrator.backends.docker.spec import create_kwargs
from orchestrator.pools.warm import pool_spec
from sandboxes.isolation import POOL_CPU_SHARES, SESSION_CPU_SHARES, kiosk_spec


def test_a_pool_member_is_created_at_the_pool_weight_a_session_at_the_engine_s() -> None:
    network = SimpleNamespace(session_id="s1", name="corral-pool-net", gateway=None)
    backend = SimpleNamespace(labels=lambda **_: {"corral.managed": "true"})
    member = pool_spec(backend, "corral-kiosk:latest", "kiosk", network)  # type: ignore[arg-type]
    assert create_kwargs(member)["cpu_shares"] == POOL_CPU_SHARES < SESSION_CPU_SHARES
    session = kiosk_spec(image="corral-kiosk:latest", labels={}, network=None, seccomp=None)
    assert "cpu_shares" not in create_kwargs(session)  # the engine's default, 1024
