"""Fixtures the unit tests of kiosk sessions share: the real SessionManager on the
in-memory backend (tests/fakes.py) with a clock the test moves."""

from __future__ import annotations

import pytest

from orchestrator.audit import AuditLog
from orchestrator.config import CorralConfig
from orchestrator.home import CorralHome
from orchestrator.surfaces.kiosk.sessions import SessionManager
from tests.fakes import FakeClock, InMemoryBackend, fake_egress


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend() -> InMemoryBackend:
    return InMemoryBackend()


@pytest.fixture
def manager(corral_home: CorralHome, backend: InMemoryBackend, clock: FakeClock) -> SessionManager:
    return SessionManager(
        corral_home,
        CorralConfig(),
        backend,
        AuditLog(corral_home.audit_file),
        fake_egress,
        clock=clock,
    )
