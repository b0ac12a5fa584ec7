"""The screenshots' PNG encoder (sandboxes/png.py; the gateway's masking and the kiosk and
desktop agents use it): every pixel back as Pillow decodes it, whatever the height against
its block of rows and whichever deflate made it (ISA-L's in the gateway, zlib's in the
agents' images), and a clear error for pixels that are not the size said."""

from __future__ import annotations

import io
import random
import zlib
from types import ModuleType

import pytest
from isal import isal_zlib
from PIL import Image

from sandboxes import png as png_module
from sandboxes.png import BUSY_BYTES_PER_PIXEL, ROWS_AT_ONCE, encode_rgb


def test_the_gateway_deflates_with_isa_l() -> None:
    """The gateway masks every browser rig screenshot with this encoder: its deflate is
    ISA-L's (a dependency of corral's), five times zlib's speed."""
    assert png_module.DEFLATE is isal_zlib


@pytest.mark.parametrize("deflate", [isal_zlib, zlib], ids=["isa-l", "zlib"])
@pytest.mark.parametrize("height", [1, ROWS_AT_ONCE - 1, ROWS_AT_ONCE, 2 * ROWS_AT_ONCE + 3])
def test_every_pixel_comes_back_whatever_the_height(
    height: int, deflate: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(png_module, "DEFLATE", deflate)
    rng = random.Random(height)
    width = 37
    raw = bytes(rng.choice((0, 255, 17)) for _ in range(width * height * 3))
    with Image.open(io.BytesIO(encode_rgb(raw, width, height))) as back:
        back.load()  # a CRC or zlib fault raises here
        assert (back.mode, back.size) == ("RGB", (width, height))
        assert back.tobytes() == raw


def test_a_busy_image_keeps_the_fallbacks_png_when_smaller_and_a_plain_one_never_asks() -> None:
    noise = random.Random(3).randbytes(64 * 48 * 3)
    smaller = b"a smaller encoding"
    assert encode_rgb(noise, 64, 48, fallback=lambda: smaller) == smaller
    flat = bytes(64 * 48 * 3)

    def never() -> bytes:
        raise AssertionError("a flat image needs no fallback")

    assert encode_rgb(flat, 64, 48, fallback=never).startswith(b"\x89PNG")


def test_a_page_of_text_s_weight_is_encoded_once() -> None:
    """A screenshot of paragraphs weighs ~0.24 bytes a pixel unfiltered, where Pillow's
    filtered PNG saves ~2 % for twice the time: under the line, no second pass."""
    width, height = 64, 48
    busy_rows = random.Random(5).randbytes(4 * width * 3)  # 4 rows of noise, 44 flat
    raw = busy_rows + bytes((height - 4) * width * 3)
    png = encode_rgb(raw, width, height)
    assert width * height / 8 < len(png) < width * height * BUSY_BYTES_PER_PIXEL

    def never() -> bytes:
        raise AssertionError("a page of text's weight needs no second pass")

    assert encode_rgb(raw, width, height, fallback=never) == png


def test_pixels_that_are_not_the_size_said_are_refused() -> None:
    with pytest.raises(ValueError, match="not 10x10 RGB pixels"):
        encode_rgb(bytes(299), 10, 10)
