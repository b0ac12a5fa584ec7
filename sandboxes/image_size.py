"""Screenshots at the size an agent asks for (issue 25 item 3): `max_width` down-scales an
image wider than it, aspect kept, after the masking was done at full size (so a masked
region stays masked whatever the scale). Pure: bytes in, bytes out. The parameter is
`sandboxes.params.MaxWidth`."""

from __future__ import annotations

import io

from PIL import Image

from sandboxes.masking import png_size


def scale_to_width(png: bytes, max_width: int) -> tuple[bytes, tuple[int, int]] | None:
    """`png` scaled down to `max_width` pixels wide (aspect kept) and its new size, or None
    when it is not wider than that (or not a PNG: it is passed on as it is)."""
    size = png_size(png)
    if size is None or size[0] <= max_width:
        return None
    width, height = size
    new = (max_width, max(1, round(height * max_width / width)))
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        smaller = image.resize(new, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    smaller.save(out, format="PNG", compress_level=6)
    return out.getvalue(), new
