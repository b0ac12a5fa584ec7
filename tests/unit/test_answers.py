"""The typed answer (orchestrator.surfaces.answers) and its one rendering on the wire
(orchestrator.gateway.wire.ComputerUseAnswer.of): the wire stays what it was."""

from __future__ import annotations

import base64
import dataclasses

import pytest
from pydantic import ValidationError

from orchestrator.gateway.wire import ComputerUseAnswer
from orchestrator.surfaces.answers import (
    Answer,
    Image,
    answer,
    error,
    image_answer,
    image_block,
    text_block,
)
from sandboxes.masking import MaskPlan
from tests.gateway_helpers import TINY_PNG

pytestmark = pytest.mark.unit


def wire(value: Answer) -> str:
    return ComputerUseAnswer.of(value).model_dump_json(by_alias=True)


def test_a_text_answer_renders_as_it_always_has_on_the_wire() -> None:
    assert wire(answer(text_block("Clicked."), session_id="s1")) == (
        '{"content":[{"type":"text","text":"Clicked."}],"is_error":false,'
        '"structured":{"session_id":"s1"}}'
    )
    assert wire(error("no")) == (
        '{"content":[{"type":"text","text":"no"}],"is_error":true,"structured":null}'
    )


def test_an_image_is_bytes_inside_and_base64_only_on_the_wire() -> None:
    png = base64.b64decode(TINY_PNG)
    shot = image_answer(png, MaskPlan(False), "3/50 actions.", used=3, max_actions=50)

    assert shot.images == (Image(png),) and shot.content[0] is shot.images[0]
    assert shot.text == "3/50 actions."
    rendered = ComputerUseAnswer.of(shot).model_dump(mode="json", by_alias=True)
    assert rendered["content"] == [
        {"type": "image", "data": TINY_PNG, "mimeType": "image/png"},
        {"type": "text", "text": "3/50 actions."},
    ]
    assert rendered["structured"] == {
        "masked": False,
        "mask_reason": None,
        "masked_fields": 0,
        "actions_used": 3,
        "max_actions": 50,
    }


def test_an_answer_is_a_frozen_value_and_a_malformed_one_is_refused_at_the_edge() -> None:
    done = answer(image_block(b"\x89PNG"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.is_error = True  # type: ignore[misc]
    with pytest.raises(ValidationError):
        ComputerUseAnswer.of(Answer((Image(b"", mime_type="text/html; x"),)))
