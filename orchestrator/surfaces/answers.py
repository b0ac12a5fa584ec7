"""The shape of a tool answer, made once for every surface: text and image blocks, the
error flag, structured content; and the masked image answer every screenshot gives."""

from __future__ import annotations

import base64
from typing import Any

from sandboxes.masking import MaskPlan


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_block(png: bytes) -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(png).decode(), "mimeType": "image/png"}


def answer(*blocks: dict[str, Any], is_error: bool = False, **structured: Any) -> dict[str, Any]:
    return {"content": list(blocks), "is_error": is_error, "structured": structured or None}


def image_answer(
    png: bytes, plan: MaskPlan, status: str, *, used: int, max_actions: int
) -> dict[str, Any]:
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
