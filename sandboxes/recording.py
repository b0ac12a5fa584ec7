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
    draw = ImageDraw.Draw(out)
    for mark in marks:
        if mark.point is not None:
            _ring(draw, mark.point)
            if mark.arrow is not None:
                _arrow(draw, mark.point, mark.arrow)
    caption = " | ".join(m.label for m in marks)[: LABEL_MAX * 2]
    top = max(0, out.height - 18)
    draw.rectangle((0, top, out.width, out.height), fill=(0, 0, 0))
    draw.text((6, top + 3), caption, fill=(255, 255, 255))
    return out


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
    tip = (x + dx * 60, y + dy * 60)
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
