"""What a recording holds and keeps (issue 24), as pure policy: the marks an action leaves
on the next frame, how they are drawn, and which recordings retention removes.

A mark is drawn from the action's validated parameters and its step text only: a click's
point, a scroll's arrow, the step ("typed 12 characters", "pressed a chord"): never the
text typed or the key pressed (`sandboxes.step_text` already keeps those out of a step).
Frames reach the recorder masked (the screenshot path's masking); marks are drawn on the
masked frame, so a mark never uncovers anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from PIL import Image, ImageDraw

Direction = Literal["up", "down", "left", "right"]
RECORDING_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
LABEL_MAX = 80
MARK_COLOUR = (255, 0, 200)
DAY = 86_400.0
CAPTION_HEIGHT = 18  # the steps' band at the bottom of a marked frame
ARROW_LENGTH = 60
# How far a mark's pixels reach, and EDGE more: a ring's outer edge (radius 14) and an
# arrow's head (10 to each side of the shaft; its line 4 px wide).
RING_REACH = 16
ARROW_REACH = 12
EDGE = 2  # unmarked pixels kept inside a box's edge: 4:2:0 colour is filtered across it


@dataclass(frozen=True, slots=True)
class Mark:
    """What one action left on the screen's next frame."""

    label: str  # the action's step, cut to LABEL_MAX characters
    point: tuple[int, int] | None = None  # where it acted (a click, a tap, a scroll)
    arrow: Direction | None = None  # a scroll's or swipe's direction


def mark_of(params: Any, step: str) -> Mark:
    """The mark of an action with validated parameters `params` (a pydantic model: a
    kiosk tool's, a rig verb) and its step text."""
    x, y = getattr(params, "x", None), getattr(params, "y", None)
    point = (x, y) if isinstance(x, int) and isinstance(y, int) else None
    direction = getattr(params, "direction", None)
    arrow = direction if direction in ("up", "down", "left", "right") else None
    return Mark(step[:LABEL_MAX], point, arrow)


def marks_of(raw: Any) -> tuple[Mark, ...]:
    """The marks of a frame sent to a recording's encoder (`orchestrator.recordings.encoder`),
    `[[label, [x, y] | null, arrow | null], ...]` (`mark_fields` writes them)."""
    if not isinstance(raw, list):
        raise ValueError("marks must be a list")
    marks = []
    for label, point, arrow in raw:
        at = None if point is None else (int(point[0]), int(point[1]))
        if arrow not in (None, "up", "down", "left", "right"):
            raise ValueError(f"a mark's arrow {arrow!r}")
        marks.append(Mark(str(label)[:LABEL_MAX], at, arrow))
    return tuple(marks)


def mark_fields(mark: Mark) -> list[Any]:
    """A mark as a recording's encoder is sent it (`marks_of` reads it back)."""
    return [mark.label, None if mark.point is None else list(mark.point), mark.arrow]


def draw_marks(image: Image.Image, marks: Sequence[Mark]) -> Image.Image:
    """`image` (RGB, already masked) with `marks` drawn on it: a ring at each point, an
    arrow for each direction, the steps as a caption at the bottom. Returns a copy."""
    if not marks:
        return image
    out = image.copy()
    draw_marks_on(out, marks, (0, 0), out.size)
    return out


def draw_marks_on(
    piece: Image.Image, marks: Sequence[Mark], origin: tuple[int, int], size: tuple[int, int]
) -> None:
    """Draw `marks` in place on `piece`, the part of a frame of `size` whose top left corner
    is at `origin` (the whole frame at (0, 0)): what falls outside the piece is left out."""
    draw = ImageDraw.Draw(piece)
    ox, oy = origin
    for mark in marks:
        if mark.point is not None:
            at = (mark.point[0] - ox, mark.point[1] - oy)
            _ring(draw, at)
            if mark.arrow is not None:
                _arrow(draw, at, mark.arrow)
    caption = " | ".join(m.label for m in marks)[: LABEL_MAX * 2]
    top = max(0, size[1] - CAPTION_HEIGHT) - oy
    draw.rectangle((0 - ox, top, size[0] - ox, size[1] - oy), fill=(0, 0, 0))
    draw.text((6 - ox, top + 3), caption, fill=(255, 255, 255))


def mark_boxes(marks: Sequence[Mark], size: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    """The boxes (left, top, right, bottom; even, inside `size`) that hold every pixel
    `draw_marks` changes for `marks`: the caption's band and one box around each point's
    ring and arrow. A recording's encoder converts only these again (encoder.py)."""
    if not marks:
        return []
    width, height = size
    boxes = [(0, max(0, height - CAPTION_HEIGHT - EDGE), width, height)]
    for mark in marks:
        if mark.point is None:
            continue
        x, y = mark.point
        left, top, right, bottom = x - RING_REACH, y - RING_REACH, x + RING_REACH, y + RING_REACH
        if mark.arrow is not None:
            dx, dy = _ARROWS[mark.arrow]
            tip = (x + dx * ARROW_LENGTH, y + dy * ARROW_LENGTH)
            left, top = min(left, tip[0] - ARROW_REACH), min(top, tip[1] - ARROW_REACH)
            right, bottom = max(right, tip[0] + ARROW_REACH), max(bottom, tip[1] + ARROW_REACH)
        boxes.append((left, top, right + 1, bottom + 1))  # right and bottom: past the last
    return [box for box in (_even_inside(b, size) for b in boxes) if box is not None]


def _even_inside(
    box: tuple[int, int, int, int], size: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """`box` grown to even edges (whole 2x2 blocks, as 4:2:0 video stores colour) and cut to
    the frame; None when nothing of it is inside."""
    left, top = max(0, box[0] - box[0] % 2), max(0, box[1] - box[1] % 2)
    right, bottom = min(size[0], box[2] + box[2] % 2), min(size[1], box[3] + box[3] % 2)
    return (left, top, right, bottom) if left < right and top < bottom else None


def _ring(draw: ImageDraw.ImageDraw, point: tuple[int, int]) -> None:
    x, y = point
    for radius in (12, 13, 14):
        draw.ellipse((x - radius, y - radius, x + radius, y + radius), outline=MARK_COLOUR)
    draw.ellipse((x - 2, y - 2, x + 2, y + 2), fill=MARK_COLOUR)


_ARROWS: dict[Direction, tuple[int, int]] = {
    "up": (0, -1),
    "down": (0, 1),
    "left": (-1, 0),
    "right": (1, 0),
}


def _arrow(draw: ImageDraw.ImageDraw, point: tuple[int, int], direction: Direction) -> None:
    dx, dy = _ARROWS[direction]
    x, y = point
    tip = (x + dx * ARROW_LENGTH, y + dy * ARROW_LENGTH)
    draw.line((x, y, *tip), fill=MARK_COLOUR, width=4)
    side = (dy * 10, dx * 10)  # perpendicular to the shaft
    back = (tip[0] - dx * 14, tip[1] - dy * 14)
    draw.polygon(
        [tip, (back[0] + side[0], back[1] + side[1]), (back[0] - side[0], back[1] - side[1])],
        fill=MARK_COLOUR,
    )


@dataclass(frozen=True, slots=True)
class Kept:
    """A recording, as retention sees it."""

    id: str
    started_at: float  # wall clock
    bytes: int
    live: bool  # its session is still running: never removed by retention


def to_prune(kept: Iterable[Kept], now: float, keep_days: int, max_total_bytes: int) -> list[str]:
    """The recordings retention removes, oldest first: every finished one older than
    `keep_days`, then the oldest finished ones while all of them together hold more than
    `max_total_bytes`. A live recording is never removed (the recorder stops it itself
    when it alone is over the bound: `over_bound`)."""
    ordered = sorted(kept, key=lambda k: (k.started_at, k.id))
    gone = [k.id for k in ordered if not k.live and now - k.started_at > keep_days * DAY]
    total = sum(k.bytes for k in ordered if k.id not in gone)
    for k in ordered:
        if total <= max_total_bytes:
            break
        if k.live or k.id in gone:
            continue
        gone.append(k.id)
        total -= k.bytes
    return gone


def over_bound(kept: Iterable[Kept], max_total_bytes: int) -> bool:
    """Whether the live recordings alone hold more than the bound (they stop then)."""
    return sum(k.bytes for k in kept if k.live) > max_total_bytes


def check_recording_id(value: str) -> str:
    """A recording's id (its surface's id): a safe file name, or ValueError naming it."""
    if not RECORDING_ID_RE.fullmatch(value):
        raise ValueError(
            f"recording id {value[:80]!r} is not a recording's id "
            "(lower-case letters, digits and '-', at most 64; `corral recordings list`)"
        )
    return value
