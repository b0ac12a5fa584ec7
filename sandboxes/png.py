"""PNG encoding of raw RGB pixels, fast (the standard library suffices: the kiosk and
desktop agents encode their screenshots with it too, carried into their images by
`SHARED_CONTEXT` in orchestrator/backends/docker/images.py).

Every row unfiltered, deflated at level 1: about half the time of Pillow's encoder at its
fastest, which still chooses a filter for every row (a 1280x800 page here: 5 ms against
11), and as small for pages of text and flat colour. Where the `isal` package is installed
(the gateway's dependencies: it masks every browser rig screenshot here) the deflate is
Intel ISA-L's at its level 1, five times zlib's speed for 5 % more bytes (a 1280x800 page
of text here: 1.4 against 7.6 ms, 84 against 80 KB); without it (the agents' images),
zlib's. A photograph compresses badly unfiltered: past 3 bytes per 8 pixels
(`BUSY_BYTES_PER_PIXEL`), the caller's fallback encoder (Pillow's, filtered) is run too
and the smaller PNG kept.

Where that line lies (1280x800 screenshots of a kiosk, bytes a pixel unfiltered, and what
Pillow's filtered PNG weighed against it): a form 0.07 (1.05x), a page of paragraphs 0.24
(0.98x), a full-page CSS gradient 0.28 (1.12x), a smooth photograph-like picture 0.48
(0.79x). Pages of text and UI come well under it, so their screenshot is encoded once:
the filtered second pass cost a page of paragraphs 27 ms more for 2 % fewer bytes while
the line was at one byte per 8 pixels (issue 23, docs/benchmarks.md).
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

try:  # ISA-L's deflate (PyPI `isal`): a zlib stream, as every PNG reader expects
    from isal import isal_zlib

    DEFLATE: ModuleType = isal_zlib
except ImportError:  # pragma: no cover - the agents' images have the standard library's
    DEFLATE = zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
BUSY_BYTES_PER_PIXEL = 3 / 8
ROWS_AT_ONCE = 64  # rows filtered and compressed at a time


def encode_rgb(
    raw: bytes, width: int, height: int, fallback: Callable[[], bytes] | None = None
) -> bytes:
    """`raw` (8-bit RGB, rows top to bottom) as a PNG; for a busy image, the smaller of
    that and `fallback()`'s."""
    stride = width * 3
    if len(raw) != stride * height:
        raise ValueError(f"{len(raw)} bytes are not {width}x{height} RGB pixels")
    # A block of rows at a time, never a second copy of the whole image: a fresh buffer of
    # megabytes costs its page faults each time (measured: twice the encoding's time).
    deflate, parts = DEFLATE.compressobj(1), list[bytes]()
    for top in range(0, height, ROWS_AT_ONCE):
        rows = range(top, min(height, top + ROWS_AT_ONCE))
        block = b"".join(b"\0" + raw[i * stride : (i + 1) * stride] for i in rows)
        parts.append(deflate.compress(block))
    parts.append(deflate.flush())
    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    png = SIGNATURE + _chunk(b"IHDR", head)
    png += _chunk(b"IDAT", b"".join(parts)) + _chunk(b"IEND", b"")
    if fallback is None or len(png) <= width * height * BUSY_BYTES_PER_PIXEL:
        return png
    return min(png, fallback(), key=len)


class Picture(Protocol):
    """What this module needs of a Pillow image (it does not import Pillow: an agent's
    image has it, this module travels without it)."""

    @property
    def mode(self) -> str: ...

    @property
    def size(self) -> tuple[int, int]: ...

    def tobytes(self) -> bytes: ...

    def convert(self, mode: str) -> Picture: ...

    def save(self, fp: Any, format: str | None = None, **params: Any) -> None: ...


def encode_image(image: Picture) -> bytes:
    """A Pillow image as a PNG: `encode_rgb`, Pillow's own filtered encoding the fallback
    for a busy image."""
    rgb = image if image.mode == "RGB" else image.convert("RGB")

    def pillows() -> bytes:
        out = io.BytesIO()
        rgb.save(out, format="PNG", compress_level=1)
        return out.getvalue()

    return encode_rgb(rgb.tobytes(), *rgb.size, fallback=pillows)


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
