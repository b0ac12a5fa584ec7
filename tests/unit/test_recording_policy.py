"""Recordings' pure policy (sandboxes.recording): the marks an action leaves (never text),
how they are drawn, retention, and recording ids."""

from __future__ import annotations

import pytest
from PIL import Image

from sandboxes.params import ClickParams, ScrollParams, TypeParams
from sandboxes.recording import (
    DAY,
    EDGE,
    MARK_COLOUR,
    Kept,
    Mark,
    check_recording_id,
    draw_marks,
    draw_marks_on,
    mark_boxes,
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


MARK_SETS = [
    [Mark("clicked", (5, 5))],
    [Mark("scrolled", (398, 298), "down"), Mark("scrolled", (200, 150), "left")],
    [Mark("scrolled", (0, 0), "up"), Mark("scrolled", (399, 150), "right")],
    [Mark("typed 3 characters")],  # no point: the caption alone
]


@pytest.mark.parametrize("marks", MARK_SETS)
def test_the_mark_boxes_hold_every_pixel_the_marks_change_with_an_unmarked_edge(
    marks: list[Mark],
) -> None:
    """A recording's encoder converts only `mark_boxes` again (encoder.py): every pixel the
    marks change is inside a box and at least EDGE pixels from its edges (but where the
    box meets the frame's), so the colour the encoder filters across an edge is unmarked
    on both sides; the boxes are on even pixels (whole 4:2:0 blocks)."""
    size = (400, 300)
    plain = Image.new("RGB", size, (40, 90, 140))
    drawn = draw_marks(plain, marks)
    boxes = mark_boxes(marks, size)
    assert boxes and all(v % 2 == 0 for box in boxes for v in box), boxes

    def inner(box: tuple[int, int, int, int], x: int, y: int) -> bool:
        left, top, right, bottom = box
        return (
            (left == 0 or x >= left + EDGE)
            and (top == 0 or y >= top + EDGE)
            and (right == size[0] or x < right - EDGE)
            and (bottom == size[1] or y < bottom - EDGE)
            and left <= x < right
            and top <= y < bottom
        )

    changed = [
        (x, y)
        for y in range(size[1])
        for x in range(size[0])
        if drawn.getpixel((x, y)) != plain.getpixel((x, y))
    ]
    assert changed
    outside = [p for p in changed if not any(inner(box, *p) for box in boxes)]
    assert not outside, outside[:10]


def test_marks_drawn_on_a_piece_are_the_same_pixels_as_on_the_whole_frame() -> None:
    size = (400, 300)
    plain = Image.new("RGB", size, (40, 90, 140))
    marks = [Mark("scrolled", (120, 100), "down"), Mark("clicked", (390, 290))]
    whole = draw_marks(plain, marks)
    for box in mark_boxes(marks, size):
        piece = plain.crop(box)
        draw_marks_on(piece, marks, (box[0], box[1]), size)
        assert piece.tobytes() == whole.crop(box).tobytes(), box
