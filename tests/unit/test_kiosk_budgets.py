"""The kiosk agent's probe budgets (rig_images/kiosk/kiosk_agent/common.py) and the desktop
agent's walk budget (rig_images/desktop/desktop_mask.py) against the gateway's deadlines
for the same ops: a probe that ran out of its budget is an answer (a black image, an
unknown target), a missed deadline ends the session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from orchestrator.surfaces.acts_on import TARGET_DEADLINE
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.kiosk.session import KioskSession

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "rig_images" / "kiosk"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "rig_images" / "desktop"))
from desktop_mask import WALK_S
from kiosk_agent.common import (
    PROBE_BUDGET_S,
    PROBE_STEP_S,
    READ_BUDGET_S,
    OpError,
    step_s,
    within,
)

pytestmark = pytest.mark.unit

# What a screenshot spends besides its two probes (the grab and the PNG), with room for
# a loaded machine: the grab and a 1280x800 PNG take well under 0.2 s here.
GRAB_AND_PNG_S = 1.0
# The desktop agent's, besides its walks: the grab, X's window list and a PNG encoded in
# Python, on a host whose two cores also run four busy processes (a series run took more
# than 5 s in all).
DESKTOP_REST_S = 5.0


def test_the_budgets_fit_inside_the_gateways_deadlines() -> None:
    assert KioskSession.screenshot_deadline >= 2 * PROBE_BUDGET_S + GRAB_AND_PNG_S
    assert DesktopRig.screenshot_deadline >= WALK_S + DESKTOP_REST_S
    assert READ_BUDGET_S < TARGET_DEADLINE


def test_a_step_gets_what_the_budget_has_left_and_none_once_it_is_spent() -> None:
    assert step_s() == PROBE_STEP_S  # no budget: each step its own bound
    with within(0.5):
        assert 0 < step_s() <= 0.5
        with within(100.0):
            assert step_s() == PROBE_STEP_S
        assert step_s() <= 0.5  # the outer budget is back
    with within(0.0), pytest.raises(OpError, match="ran out of time"):
        step_s()
    assert step_s() == PROBE_STEP_S
