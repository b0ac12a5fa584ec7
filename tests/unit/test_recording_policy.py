"""Recordings' pure policy (sandboxes.recording): the marks an action leaves (never text),
how they are drawn, retention, and recording ids."""

from __future__ import annotations

import pytest
from PIL import Image

from sandboxes.params import ClickParams, ScrollParams, TypeParams
from sandboxes.recording import (
    DAY,
    MARK_COLOUR,
    Kept,
    Mark,
    check_recording_id,
    draw_marks,
    mark_of,
    over_bound,
    to_prune,
)
from sandboxes.step_text import step_of

MB = 1 << 20


def test_a_click_marks_its_point_and_a_scroll_its_direction() -> None:
    click = ClickParams(x=10, y=20)
    assert mark_of(click, "clicked") == Mark("clicked", (10, 20), None)
    scroll = ScrollParams(x=5, y=6, direction="up")
    assert mark_of(scroll, "scrolled") == Mark("scrolled", (5, 6), "up")


def test_a_typed_text_never_reaches_a_mark() -> None:
    params = TypeParams(text="hunter2-secret")
    mark = mark_of(params, step_of("computer_type", params))
    assert "hunter2" not in mark.label and mark.point is None
    assert mark.label == step_of("computer_type", params)


def test_marks_are_drawn_on_a_copy_and_never_uncover_the_mask() -> None:
    black = Image.new("RGB", (400, 300), (0, 0, 0))
    drawn = draw_marks(black, [Mark("clicked at 100,100", (100, 100), "down")])
    assert black.getextrema() == ((0, 0), (0, 0), (0, 0))  # the original is untouched
    assert drawn.getpixel((100 + 13, 100)) == MARK_COLOUR  # the ring
    assert drawn.getpixel((100, 100 + 40)) == MARK_COLOUR  # the arrow, downwards
    assert drawn.getpixel((200, 200)) == (0, 0, 0)  # elsewhere: as it was
    assert draw_marks(black, []) is black


def test_retention_removes_the_old_then_the_oldest_over_the_bound_never_a_live_one() -> None:
    now = 100 * DAY
    kept = [
        Kept("old", now - 31 * DAY, 1 * MB, live=False),
        Kept("a", now - 3 * DAY, 5 * MB, live=False),
        Kept("b", now - 2 * DAY, 5 * MB, live=False),
        Kept("live", now - 40 * DAY, 50 * MB, live=True),
        Kept("c", now - 1 * DAY, 5 * MB, live=False),
    ]
    assert to_prune(kept, now, keep_days=30, max_total_bytes=1000 * MB) == ["old"]
    # 65 MB left, bound 60: the oldest finished one goes (the live one is older, but live).
    assert to_prune(kept, now, keep_days=30, max_total_bytes=60 * MB) == ["old", "a"]
    assert to_prune(kept, now, keep_days=30, max_total_bytes=51 * MB) == ["old", "a", "b", "c"]
    assert over_bound(kept, 49 * MB) and not over_bound(kept, 50 * MB)


@pytest.mark.parametrize("bad", ["", "../x", "A1", "a/b", "a" * 65, "-a", "a b"])
def test_a_recording_id_is_a_safe_file_name(bad: str) -> None:
    with pytest.raises(ValueError, match="recording id"):
        check_recording_id(bad)
    assert check_recording_id("r0123abcd") == "r0123abcd"
