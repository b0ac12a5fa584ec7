"""The console timeline's thumbnail of a masked screenshot: its size and its colours,
whatever the screen's size and the PNG's mode."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from orchestrator.people.timeline import THUMB_WIDTH, thumbnail

RED, BLUE = (200, 30, 30), (30, 30, 200)


def halves(size: tuple[int, int], mode: str) -> bytes:
    """A screenshot whose left half is red and right half blue, as a PNG in `mode`."""
    image = Image.new("RGB", size, RED)
    image.paste(BLUE, (size[0] // 2, 0, size[0], size[1]))
    out = io.BytesIO()
    exact = {"palette": Image.Palette.ADAPTIVE} if mode == "P" else {}  # no dithering
    image.convert(mode, **exact).save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize(
    ("size", "height"),
    [((1280, 800), 200), ((1920, 1080), 180), ((1024, 768), 240), ((390, 844), 693)],
)
@pytest.mark.parametrize("mode", ["RGB", "RGBA", "P"])
def test_a_thumbnail_is_320_wide_in_proportion_and_keeps_its_colours(
    size: tuple[int, int], height: int, mode: str
) -> None:
    with Image.open(io.BytesIO(thumbnail(halves(size, mode)))) as small:
        assert small.format == "PNG"
        assert small.size == (THUMB_WIDTH, height)
        rgb = small.convert("RGB")
        for x, colour in ((THUMB_WIDTH // 4, RED), (3 * THUMB_WIDTH // 4, BLUE)):
            got = rgb.getpixel((x, height // 2))
            assert all(abs(a - b) <= 2 for a, b in zip(got, colour, strict=True)), (x, got)


def test_a_grey_screenshot_stays_grey() -> None:
    out = io.BytesIO()
    Image.new("L", (1280, 800), 90).save(out, format="PNG")
    with Image.open(io.BytesIO(thumbnail(out.getvalue()))) as small:
        assert small.convert("RGB").getpixel((10, 10)) == (90, 90, 90)
