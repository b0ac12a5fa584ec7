"""The kiosk agent's frame arithmetic (rig_images/kiosk/kiosk_agent/frames.py): which
frames the main probe cannot enter, and how a frame's rectangle is carried to its parent.
The CDP side of the same path is tested in tests/e2e/test_computer_use.py (real Chromium,
cross-origin and cross-site frames, pixels checked)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "rig_images" / "kiosk"))
from kiosk_agent.frames import unreachable_frames

from sandboxes.secret_fields import carry, quad_box

pytestmark = pytest.mark.unit


def node(fid: str, origin: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"frame": {"id": fid, "securityOrigin": origin}, "childFrames": list(children)}


def ids(frames: list[dict[str, Any]]) -> list[str]:
    return [f["id"] for f in frames]


A, B = "https://a.test", "https://b.test"


def test_frames_of_the_top_origin_are_left_to_the_main_probe() -> None:
    tree = {"frameTree": node("top", A, node("f1", A), node("f2", B))}
    assert ids(unreachable_frames(tree, set())) == ["f2"]


def test_a_same_origin_frame_below_a_foreign_one_is_unreachable_too() -> None:
    tree = {"frameTree": node("top", A, node("f1", B, node("f2", A, node("f3", A))))}
    assert ids(unreachable_frames(tree, set())) == ["f1", "f2", "f3"]


def test_a_sandboxed_frame_with_an_opaque_origin_is_unreachable() -> None:
    tree = {"frameTree": node("top", A, node("f1", "://"))}
    assert ids(unreachable_frames(tree, set())) == ["f1"]


def test_two_opaque_origins_are_not_the_same_origin() -> None:
    tree = {"frameTree": node("top", "://", node("f1", "://"), node("f2", "null"))}
    assert ids(unreachable_frames(tree, set())) == ["f1", "f2"]


def test_out_of_process_frames_and_their_children_are_skipped() -> None:
    tree = {"frameTree": node("top", A, node("oop", B, node("kid", B)), node("f", B))}
    assert ids(unreachable_frames(tree, {"oop"})) == ["f"]


def test_carry_offsets_and_scales_by_the_owner_box() -> None:
    # A 200x150 frame drawn in a 400x300 box at (300, 200): everything doubles.
    box = quad_box([300, 200, 700, 200, 700, 500, 300, 500])
    assert carry([20, 20, 100, 20], box, (200, 150)) == [340, 240, 200, 40]


def test_carry_clips_to_the_box_and_drops_what_is_outside() -> None:
    box = (10.0, 10.0, 110.0, 60.0)
    assert carry([90, 40, 50, 50], box, (100, 50)) == [100, 50, 10, 10]
    assert carry([200, 0, 10, 10], box, (100, 50)) is None
    assert carry([0, 0, 10, 10], box, (0, 50)) is None
