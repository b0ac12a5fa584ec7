"""Screenshots at the size the agent asks for (issue 25 item 3): `max_width` on every
screenshot scales the image down, aspect kept, after it was masked at full size; the
answer says so; a width out of range is refused naming the parameter and the range."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from orchestrator.errors import ParamError
from orchestrator.surfaces.answers import fit_width, image_answer
from sandboxes.catalogue import BY_NAME
from sandboxes.image_size import scale_to_width
from sandboxes.masking import MaskPlan, apply_mask, png_size
from sandboxes.params import validate
from tests.unit.test_output_schemas import problems

pytestmark = pytest.mark.unit

WHITE = (255, 255, 255)


def page(width: int = 1280, height: int = 800) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), WHITE).save(out, format="PNG")
    return out.getvalue()


def pixel(png: bytes, x: int, y: int) -> tuple[int, ...]:
    with Image.open(io.BytesIO(png)) as image:
        return tuple(image.convert("RGB").getpixel((x, y)))  # type: ignore[arg-type]


def test_a_wider_image_is_scaled_to_max_width_with_its_aspect_kept() -> None:
    scaled = scale_to_width(page(1280, 800), 640)

    assert scaled is not None
    png, size = scaled
    assert size == (640, 400) and png_size(png) == (640, 400)


def test_an_image_no_wider_than_max_width_is_left_as_it_is() -> None:
    assert scale_to_width(page(1280, 800), 1280) is None
    assert scale_to_width(b"not a png", 64) is None


def test_a_masked_field_stays_masked_at_any_scale() -> None:
    """Masking first, at full size: the black field is black in the small image too."""
    plan = MaskPlan(False, rects=((400, 300, 400, 200),), reason="")
    masked = apply_mask(page(), plan, (1280, 800))

    scaled = scale_to_width(masked, 320)

    assert scaled is not None
    png, (w, h) = scaled
    assert (w, h) == (320, 200)
    assert pixel(png, 150, 100) == (0, 0, 0)  # the middle of the field, scaled by 1/4
    assert pixel(png, 10, 10) == WHITE


def test_the_answer_says_it_was_scaled_and_still_validates() -> None:
    plan = MaskPlan(False)
    said = image_answer(page(), plan, "Actions used: 0/9.", used=0, max_actions=9)

    fitted = fit_width(said, 800)

    assert png_size(fitted.images[0].png) == (800, 500)
    assert "Scaled from 1280x800 to 800x500" in fitted.text and "1.6" in fitted.text
    assert fitted.structured is not None
    assert fitted.structured["scaled_from"] == [1280, 800]
    assert fitted.structured["scaled_to"] == [800, 500]
    state = {
        "surface": "kiosk",
        "surface_id": "s1",
        "controller": "ai",
        "actions_used": 0,
        "max_actions": 9,
        "idle_seconds_left": 60,
        "lifetime_seconds_left": 600,
    }
    assert problems("computer_screenshot", {**fitted.structured, **state}) == []
    assert fit_width(said, None) is said and fit_width(said, 2000) is said


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("computer_screenshot", {}),
        ("browser_use", {"verb": "screenshot"}),
        ("computer_use", {"verb": "screenshot"}),
        ("mobile_use", {"verb": "screenshot"}),
        ("ios_use", {"verb": "screenshot"}),
    ],
)
def test_every_screenshot_takes_max_width_and_refuses_it_out_of_range(
    tool: str, arguments: dict[str, object]
) -> None:
    params = validate(BY_NAME[tool].params, {**arguments, "max_width": "640"})
    verb = getattr(params, "verb", params)
    assert getattr(verb, "max_width", None) == 640
    for bad in (63, 8193, True):
        with pytest.raises(ParamError) as refused:
            validate(BY_NAME[tool].params, {**arguments, "max_width": bad})
        assert "max_width" in str(refused.value), refused.value
        assert bad is True or "from 64 to 8192" in str(refused.value), refused.value
