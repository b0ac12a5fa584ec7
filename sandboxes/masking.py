"""Screenshot masking (SPEC S2.4), pure: a probe in, a mask plan out, pixels blacked.

Sensitive: password fields (blacked out where they are) and pages the deny list
names (the whole image). When the probe cannot tell what is on screen (several
top-level windows, the focused window unreadable, the probe failed or timed
out) the WHOLE image is masked and the reason says what to do next. An
unmasked image never leaves because a probe failed.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw

from sandboxes.png import SIGNATURE, encode_image
from sandboxes.urlnorm import host_covers, normalise, normalise_host_text

PAD = 2  # pixels around a password field, so its border and caret are covered too
# The largest screen corral decodes, paints or makes black: a side of 8192 pixels (an 8K
# display's width), 40 million pixels in all (8K UHD is 33 million). A screen's size comes
# from what a container or a device says (a PNG's header, a kiosk's answer, `wm size`): a
# compromised one could name any size, and the gateway would allocate for it.
MAX_SIDE = 8192
MAX_PIXELS = 40_000_000

Rect = tuple[int, int, int, int]  # x, y, width, height


@dataclass(frozen=True, slots=True)
class Probe:
    windows: int
    focused_ok: bool
    password_rects: tuple[Rect, ...]
    url: str
    title: str
    error: str | None = None
    pages: int = 1  # page targets (tabs, popups) the browser has
    frame_urls: tuple[str, ...] = ()  # every frame below the top-level page
    zoom: float = 1.0  # the page's zoom (device pixels per CSS pixel)


@dataclass(frozen=True, slots=True)
class MaskPlan:
    full: bool
    rects: tuple[Rect, ...] = ()
    reason: str = ""
    next_step: str = ""

    def describe(self) -> str:
        if self.full:
            return f"The whole screenshot is masked: {self.reason}. {self.next_step}"
        if self.rects:
            return f"{len(self.rects)} password field(s) masked."
        return ""


def deny_matches(url: str, deny_list: Iterable[str]) -> str | None:
    """The deny-list entry naming `url`'s page, or None. An entry is a host (`bank.example`,
    which also covers its subdomains) or a host + path prefix (`https://shop.example/pay`,
    for http and https alike). Both sides are compared after normalisation
    (`sandboxes.urlnorm`), never as raw text, and the path case-insensitively: a server
    may answer `/PAY` as `/pay`, and a deny list must not be stepped round by a capital."""
    page = normalise(url)
    if page is None:
        return None
    host, path = page
    for entry in deny_list:
        text = entry.strip()
        if not text:
            continue
        if "://" in text:
            target = normalise(text)
            if target is None:
                continue
            entry_host, prefix = target
            if host_covers(entry_host, host) and path.casefold().startswith(prefix.casefold()):
                return entry
        else:
            bare = normalise_host_text(text)
            if bare is not None and host_covers(bare, host):
                return entry
    return None


def plan_mask(probe: Probe | None, deny_list: Sequence[str], size: tuple[int, int]) -> MaskPlan:
    if probe is None:
        return MaskPlan(
            True,
            reason="detection failed: the screen probe did not answer in time",
            next_step="Take the screenshot again; if this repeats, stop and restart the session.",
        )
    if probe.error:
        return MaskPlan(
            True,
            reason=f"detection failed: {probe.error}",
            next_step="Take the screenshot again; if this repeats, stop and restart the session.",
        )
    if probe.windows > 1:
        return MaskPlan(
            True,
            reason=f"multiple windows are open ({probe.windows}), so what is shown cannot be "
            "checked",
            next_step="Close the extra window (e.g. computer_key Escape) or ask a human to "
            "take over.",
        )
    if probe.pages > 1:
        return MaskPlan(
            True,
            reason=f"{probe.pages} tabs or popups are open, so what is shown cannot be checked",
            next_step="Go back to one tab (a human can close the others) or restart the session.",
        )
    if abs(probe.zoom - 1.0) > 0.01:
        return MaskPlan(
            True,
            reason=f"the page is zoomed to {probe.zoom:.0%}, where field positions cannot be "
            "trusted",
            next_step="Restart the session (zoom keys are refused).",
        )
    if not probe.focused_ok:
        return MaskPlan(
            True,
            reason="the focused window could not be read",
            next_step="Click into the page, then take the screenshot again.",
        )
    entry = deny_matches(probe.url, deny_list)
    if entry is not None:
        return MaskPlan(
            True,
            reason=f"the page is on the deny list ({entry})",
            next_step="Navigate away; a human must handle this page.",
        )
    for frame in probe.frame_urls:
        entry = deny_matches(frame, deny_list)
        if entry is not None:
            return MaskPlan(
                True,
                reason=f"a frame on the page is on the deny list ({entry})",
                next_step="Navigate away; a human must handle this page.",
            )
    width, height = size
    rects = tuple(
        clipped for rect in probe.password_rects if (clipped := _clip(rect, width, height))
    )
    return MaskPlan(False, rects=rects)


def _clip(rect: Rect, width: int, height: int) -> Rect | None:
    x, y, w, h = rect
    left, top = max(0, x - PAD), max(0, y - PAD)
    right, bottom = min(width, x + w + PAD), min(height, y + h + PAD)
    if right <= left or bottom <= top:
        return None
    return (left, top, right - left, bottom - top)


def png_size(png: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG's IHDR chunk, or None if `png` does not start like one."""
    if len(png) < 24 or not png.startswith(SIGNATURE) or png[12:16] != b"IHDR":
        return None
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def apply_mask(png: bytes, plan: MaskPlan, expected_size: tuple[int, int] | None = None) -> bytes:
    """The PNG with the plan's regions (or everything) painted black.

    With nothing to mask, a PNG whose header shows the expected size passes unchanged
    (decoding and re-encoding a busy 1280x800 page costs tens of milliseconds); anything
    else is decoded and re-encoded."""
    unmasked = not plan.full and not plan.rects
    if unmasked and expected_size is not None and png_size(png) == expected_size:
        return png
    return paint(decode(png), plan)


def screen_size_error(size: tuple[int, int] | None) -> str | None:
    """Why a screen of `size` is not one corral handles (None: it is): not a PNG, or past
    MAX_SIDE or MAX_PIXELS."""
    if size is None:
        return "not a PNG"
    width, height = size
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE) or width * height > MAX_PIXELS:
        return (
            f"a screen of {width}x{height} pixels (corral reads screens of at most "
            f"{MAX_SIDE} pixels a side and {MAX_PIXELS} in all)"
        )
    return None


def checked_size(size: tuple[int, int] | None) -> tuple[int, int]:
    """`size`, when corral handles a screen that large; else ValueError saying why (None,
    `png_size`'s answer for bytes that are not a PNG: "not a PNG")."""
    if (why := screen_size_error(size)) is not None or size is None:
        raise ValueError(why)
    return size


def decode(png: bytes) -> Image.Image:
    """The PNG's pixels (for `paint`; a caller may decode while it waits for the plan).
    Its header's size is checked first: a small PNG can claim a screen of gigabytes."""
    if (why := screen_size_error(png_size(png))) is not None:
        raise ValueError(f"the image is {why}")
    image = Image.open(io.BytesIO(png))  # in memory: nothing to close
    image.load()
    return image if image.mode == "RGB" else image.convert("RGB")


def paint(image: Image.Image, plan: MaskPlan) -> bytes:
    """A decoded image with the plan's regions (or everything) painted black, as a PNG."""
    if plan.full:
        masked = Image.new("RGB", image.size, (0, 0, 0))
    else:
        masked = image
        draw = ImageDraw.Draw(masked)
        for x, y, w, h in plan.rects:
            draw.rectangle((x, y, x + w - 1, y + h - 1), fill=(0, 0, 0))
    return encode_image(masked)  # sandboxes/png.py: quick, the agents' encoder too


def blank_png(width: int, height: int) -> bytes:
    """An all-black PNG of a screen's size (ValueError past MAX_SIDE or MAX_PIXELS)."""
    return _blank(*checked_size((width, height)))


@functools.lru_cache(maxsize=8)
def _blank(width: int, height: int) -> bytes:
    return encode_image(Image.new("RGB", (width, height), (0, 0, 0)))
