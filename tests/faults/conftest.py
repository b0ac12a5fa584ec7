"""Faults injected into real containers while work is in flight (issue 26): what the agent
is told, what the audit holds, and that nothing is left."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _no_leaks(no_container_left_behind: None) -> None:
    """Switches the root conftest's leak check on for this folder."""
