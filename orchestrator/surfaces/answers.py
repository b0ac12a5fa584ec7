"""The one result model of every tool the gateway runs: content blocks (text, image), the
error flag and structured content, made here for every surface, codrive and the pipeline;
and the masked image answer every screenshot gives.

An `Answer` is a frozen value: nothing patches it by position. The gateway renders it to
the wire at the edge, once (`orchestrator.gateway.wire.ComputerUseAnswer.of`): an image
block's PNG becomes base64 there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandboxes.image_size import scale_to_width
from sandboxes.masking import MaskPlan, png_size


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Image:
    png: bytes
    mime_type: str = "image/png"


Block = Text | Image


@dataclass(frozen=True, slots=True)
class Answer:
    """A tool's answer. `structured` is JSON-shaped (it goes to the client as it is)."""

    content: tuple[Block, ...]
    is_error: bool = False
    structured: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """The text blocks, joined by a space."""
        return " ".join(block.text for block in self.content if isinstance(block, Text))

    @property
    def images(self) -> tuple[Image, ...]:
        return tuple(block for block in self.content if isinstance(block, Image))


def text_block(text: str) -> Text:
    return Text(text)


def image_block(png: bytes) -> Image:
    return Image(png)


def answer(*blocks: Block, is_error: bool = False, **structured: Any) -> Answer:
    """An answer of `blocks`; `structured` keywords are its structured content (none: None)."""
    return Answer(tuple(blocks), is_error, structured or None)


def told_first(said: Answer, text: str) -> Answer:
    """`said` with `text` as its first block (what the agent must read before the rest)."""
    return Answer((text_block(text), *said.content), said.is_error, said.structured)


def with_state(said: Answer, state: Mapping[str, Any]) -> Answer:
    """`said` with the surface's `state` (`Surface.summary`) in its structured content."""
    return Answer(said.content, said.is_error, {**(said.structured or {}), **state})


def fit_width(said: Answer, max_width: int | None) -> Answer:
    """`said` with each image wider than `max_width` scaled down to it (aspect kept; the
    masking was done at full size), saying so in a text block and in `scaled_from` /
    `scaled_to`: coordinates read off a scaled image are not the screen's."""
    if max_width is None or not said.images:
        return said
    blocks: list[Block] = []
    sizes: tuple[tuple[int, int], tuple[int, int]] | None = None
    for block in said.content:
        scaled = scale_to_width(block.png, max_width) if isinstance(block, Image) else None
        if scaled is not None and isinstance(block, Image):
            sizes = (png_size(block.png) or scaled[1], scaled[1])
            block = Image(scaled[0], block.mime_type)
        blocks.append(block)
    if sizes is None:
        return said
    (w, h), (sw, sh) = sizes
    note = (
        f"Scaled from {w}x{h} to {sw}x{sh} (max_width {max_width}): multiply x and y read "
        f"off this image by {w / sw:.4g} to act on the screen."
    )
    structured = {**(said.structured or {}), "scaled_from": [w, h], "scaled_to": [sw, sh]}
    return Answer((*blocks, text_block(note)), said.is_error, structured)


def error(text: str) -> Answer:
    """A recoverable refusal or failure, said in one text block."""
    return answer(text_block(text), is_error=True)


def image_answer(png: bytes, plan: MaskPlan, status: str, *, used: int, max_actions: int) -> Answer:
    """A masked screenshot's answer: the image, what was masked and why, the budget."""
    text = " ".join(part for part in (plan.describe(), status) if part)
    return answer(
        image_block(png),
        text_block(text),
        masked=plan.full,
        mask_reason=plan.reason or None,
        masked_fields=len(plan.rects),
        actions_used=used,
        max_actions=max_actions,
    )
