"""A session's timeline for the console: every action with its time, tool, outcome and a
masked thumbnail, newest first. Never the typed text or the key pressed: a step says
"typed 12 characters" or "pressed a chord".

Thumbnails are taken off the call path: a screenshot call's own masked image becomes its
entry's thumbnail; after any other action, once the session has been quiet for
`QUIET_SECONDS` and no call of the AI's uses it (`orchestrator.recordings.use`), the
newest entry gets the masked screen as it is then: its recorder's frame of that moment
when the surface is recorded, else a screenshot of its own. Entries of a burst
of actions without a pause in between have no thumbnail of their own (the console
says so)."""

from __future__ import annotations

import io
import itertools
import time
from dataclasses import dataclass
from typing import Any, Literal

from PIL import Image

THUMB_WIDTH = 320
KEEP_ENTRIES = 200  # per surface: the console's timeline keeps this many, newest first

ThumbState = Literal["pending", "ready", "none"]

_seq = itertools.count(1)


@dataclass
class TimelineEntry:
    seq: int
    at: float  # wall clock
    tool: str
    step: str
    outcome: str  # "ok", "refused: ...", "failed: ...", "held: ...", ...
    actor: str  # "ai" or an operator's name
    thumb: bytes | None = None
    thumb_state: ThumbState = "pending"
    source_png: bytes | None = None  # a screenshot call's own masked PNG, until thumbnailed
    noted: int = 0  # the lines its surface's recorder had noted with it (`frame_since`)

    def public(self) -> dict[str, Any]:
        """What the console shows of an entry (whether it has a thumbnail, not the image)."""
        shown = {name: getattr(self, name) for name in ("seq", "at", "tool", "step", "outcome")}
        return shown | {"actor": self.actor, "thumb": self.thumb_state}


def new_entry(
    tool: str, step: str, outcome: str, actor: str = "ai", png: bytes | None = None
) -> TimelineEntry:
    return TimelineEntry(
        seq=next(_seq),
        at=time.time(),
        tool=tool,
        step=step,
        outcome=outcome,
        actor=actor,
        source_png=png,
    )


def thumbnail(png: bytes, width: int = THUMB_WIDTH) -> bytes:
    """A small PNG of an already masked screenshot (masking happens before this)."""
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        height = max(1, round(image.height * width / max(1, image.width)))
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        # Shrunk by a whole factor first (a box average: `reducing_gap=1.0`), the rest
        # resampled: a fifth of plain bilinear's time for 1280x800 -> 320x200 (a
        # gateway's thumbnail of every quiet session's screen, docs/benchmarks.md).
        small = rgb.resize((width, height), Image.Resampling.BILINEAR, reducing_gap=1.0)
    out = io.BytesIO()
    small.save(out, format="PNG", optimize=False, compress_level=6)
    return out.getvalue()


def settle_superseded(entries: list[TimelineEntry], newest: TimelineEntry) -> None:
    """Entries older than `newest` still waiting for a thumbnail will not get one."""
    for entry in entries:
        if entry is not newest and entry.thumb_state == "pending":
            entry.thumb_state = "none"
            entry.source_png = None
