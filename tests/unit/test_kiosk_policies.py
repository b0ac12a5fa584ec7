"""SPEC S2.4 and S2.6 as pure policy: URL checks and screenshot masking."""

from __future__ import annotations

import io
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from sandboxes.masking import (
    MaskPlan,
    Probe,
    apply_mask,
    blank_png,
    checked_size,
    decode,
    deny_matches,
    plan_mask,
    screen_size_error,
)
from sandboxes.png import encode_image
from sandboxes.urls import check_url
from tests.fakes import png_claiming

pytestmark = pytest.mark.unit

ALLOWED = ("site.corral.test", "docs.corral.test")
PINNED = ALLOWED


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("http://site.corral.test/", "only https:// URLs"),
        ("ftp://site.corral.test/", "only https:// URLs"),
        ("https://evil.corral.test/", "host 'evil.corral.test' is not in this agent's"),
        ("https://site.corral.test.evil/", "is not in this agent's allowed_domains"),
        ("https://sub.site.corral.test/", "is not in this agent's allowed_domains"),
        ("https://site.corral.test:8443/", "only port 443 is allowed (got 8443)"),
        ("https://user@site.corral.test/", "user name or password"),
        ("https://user:pw@site.corral.test/", "user name or password"),
        ("https://site.corral.test:99999/", "port is not a number"),
        ("https://site.corral.test/" + "a" * 1990, "at most 2000 bytes"),
        ("https://site.corral.test/a b", "spaces, control characters"),
        ("https:\\\\site.corral.test", "backslashes"),
        ("https:///path", "has no host"),
    ],
)
def test_a_url_outside_the_policy_is_refused_with_its_reason(url: str, fragment: str) -> None:
    verdict = check_url(url, ALLOWED, PINNED)
    assert not verdict.allowed
    assert verdict.message.startswith("navigation refused: ")
    assert fragment in verdict.message


@pytest.mark.parametrize(
    "url",
    [
        "https://site.corral.test/",
        "https://SITE.corral.test:443/x?y=1#z",
        "https://docs.corral.test",
    ],
)
def test_an_https_url_on_an_allowed_pinned_host_is_allowed(url: str) -> None:
    verdict = check_url(url, ALLOWED, PINNED)
    assert verdict.allowed, verdict.message


def test_exactly_2000_bytes_is_allowed_and_2001_is_not() -> None:
    base = "https://site.corral.test/"
    assert check_url(base + "a" * (2000 - len(base)), ALLOWED, PINNED).allowed
    assert not check_url(base + "a" * (2001 - len(base)), ALLOWED, PINNED).allowed
    # bytes, not characters: a 2-byte character tips it over
    assert not check_url(base + "a" * (1999 - len(base)) + "é", ALLOWED, PINNED).allowed


def test_without_an_allowlist_every_navigation_is_refused() -> None:
    verdict = check_url("https://site.corral.test/", (), ())
    assert not verdict.allowed and "no network" in verdict.message


def test_an_allowed_host_not_pinned_at_session_start_is_refused() -> None:
    verdict = check_url("https://docs.corral.test/", ALLOWED, ("site.corral.test",))
    assert not verdict.allowed and "was not resolved when the session started" in verdict.message


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_allowed_url_is_https_on_an_allowed_host_and_port_443(url: str) -> None:
    verdict = check_url(url, ALLOWED, PINNED)
    if verdict.allowed:
        assert url.lower().startswith("https://")
        assert verdict.host in ALLOWED
        assert "@" not in url.split("/")[2]


def _probe(**kw: object) -> Probe:
    base: dict[str, object] = {
        "windows": 1,
        "focused_ok": True,
        "password_rects": (),
        "url": "https://site.corral.test/",
        "title": "t",
        "error": None,
    }
    base.update(kw)
    return Probe(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("probe", "reason"),
    [
        (None, "detection failed"),
        (_probe(error="CDP timed out"), "detection failed: CDP timed out"),
        (_probe(windows=2), "multiple windows are open (2)"),
        (_probe(focused_ok=False), "the focused window could not be read"),
        (_probe(url="https://login.bank.test/x"), "the page is on the deny list (bank.test)"),
    ],
)
def test_when_the_probe_cannot_tell_the_whole_image_is_masked_with_a_reason(
    probe: Probe | None, reason: str
) -> None:
    plan = plan_mask(probe, ["bank.test"], (100, 80))
    assert plan.full
    assert reason in plan.reason
    assert plan.next_step
    assert "whole screenshot is masked" in plan.describe()


def _png(width: int, height: int, color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def test_a_password_field_is_black_and_the_rest_is_untouched() -> None:
    plan = plan_mask(_probe(password_rects=((20, 10, 30, 12),)), [], (100, 80))
    assert not plan.full and plan.rects == ((18, 8, 34, 16),)
    with Image.open(io.BytesIO(apply_mask(_png(100, 80, (250, 250, 250)), plan))) as img:
        rgb = img.convert("RGB")
        assert rgb.getpixel((35, 16)) == (0, 0, 0)  # inside the field
        assert rgb.getpixel((18, 8)) == (0, 0, 0)  # padding corner
        assert rgb.getpixel((60, 40)) == (250, 250, 250)  # elsewhere
        assert rgb.getpixel((17, 16)) == (250, 250, 250)  # just outside the padding


def test_a_full_mask_blacks_every_pixel() -> None:
    plan = plan_mask(_probe(windows=3), [], (40, 30))
    with Image.open(io.BytesIO(apply_mask(_png(40, 30, (9, 200, 9)), plan))) as img:
        assert img.convert("RGB").getextrema() == ((0, 0), (0, 0), (0, 0))


def test_rects_outside_the_screen_are_clipped_or_dropped() -> None:
    plan = plan_mask(_probe(password_rects=((90, 70, 50, 50), (500, 500, 5, 5))), [], (100, 80))
    assert plan.rects == ((88, 68, 12, 12),)


@pytest.mark.parametrize("kind", ["flat", "text-like", "noise"])
def test_the_fast_png_encoder_gives_back_every_pixel_and_is_never_larger_than_pillows(
    kind: str,
) -> None:
    """Unfiltered rows suit pages; a busy image falls back to Pillow's filtered encoding
    (the smaller is kept)."""
    rng = random.Random(7)
    if kind == "flat":
        image = Image.new("RGB", (97, 61), (12, 240, 33))
    elif kind == "text-like":
        image = Image.new("RGB", (300, 120), (255, 255, 255))
        ImageDraw.Draw(image).text((5, 5), "corral " * 20, fill=(0, 0, 0))
    else:
        image = Image.frombytes("RGB", (64, 48), rng.randbytes(64 * 48 * 3))
    png = encode_image(image)
    with Image.open(io.BytesIO(png)) as back:
        assert back.mode == "RGB" and back.size == image.size
        assert back.tobytes() == image.tobytes()
    pillows = io.BytesIO()
    image.save(pillows, format="PNG", compress_level=1)
    if kind == "noise":
        assert len(png) <= len(pillows.getvalue())


@pytest.mark.parametrize(
    ("url", "entries", "hit"),
    [
        ("https://bank.test/", ["bank.test"], "bank.test"),
        ("https://a.b.bank.test/", ["bank.test"], "bank.test"),
        ("https://notbank.test/", ["bank.test"], None),
        ("https://shop.test/pay/now", ["https://shop.test/pay"], "https://shop.test/pay"),
        ("https://shop.test/cart", ["https://shop.test/pay"], None),
        ("not a url", ["bank.test"], None),
    ],
)
def test_deny_list_entries_match_hosts_subdomains_and_url_prefixes(
    url: str, entries: list[str], hit: str | None
) -> None:
    assert deny_matches(url, entries) == hit


def test_with_nothing_to_mask_a_png_of_the_right_size_passes_unchanged() -> None:
    png = _png(40, 30, (1, 2, 3))
    plan = plan_mask(_probe(), [], (40, 30))
    assert apply_mask(png, plan, (40, 30)) is png


@pytest.mark.parametrize(
    ("size", "ok"),
    [
        ((1, 1), True),
        ((8192, 4882), True),  # 39.99 million pixels
        ((4882, 8192), True),
        ((8193, 10), False),  # a side past 8192
        ((10, 8193), False),
        ((8192, 4883), False),  # past 40 million in all
        ((0, 800), False),
        ((60000, 60000), False),
    ],
)
def test_a_screen_past_8192_a_side_or_40_million_pixels_is_neither_decoded_nor_made_black(
    size: tuple[int, int], ok: bool
) -> None:
    """A screen's size comes from what a kiosk or a device says (a PNG's header among it):
    a small PNG can claim gigabytes of pixels. Past the bound, decoding it and a black
    screen of that size are refused before anything is allocated for it."""
    assert (screen_size_error(size) is None) is ok
    if ok:
        return
    with pytest.raises(ValueError, match="corral reads screens of at most 8192 pixels a side"):
        decode(png_claiming(*size))
    with pytest.raises(ValueError, match="at most 8192 pixels a side and 40000000 in all"):
        blank_png(*size)
    with pytest.raises(ValueError, match="at most 8192"):
        apply_mask(png_claiming(*size), MaskPlan(True))
    with pytest.raises(ValueError, match="at most 8192"):
        checked_size(size)


def test_bytes_that_are_not_a_png_have_no_size_corral_handles() -> None:
    """`png_size` answers None for bytes that are not a PNG (a device's garbled capture):
    `checked_size` refuses it by name, as it refuses a screen too large."""
    assert checked_size((1280, 800)) == (1280, 800)
    with pytest.raises(ValueError, match="not a PNG"):
        checked_size(None)


def test_a_png_of_the_wrong_size_or_not_a_png_is_decoded_not_passed_through() -> None:
    png = _png(40, 30, (1, 2, 3))
    plan = plan_mask(_probe(), [], (40, 30))
    assert apply_mask(png, plan, (41, 30)) is not png  # re-encoded
    with pytest.raises(Exception):  # noqa: B017 - Pillow's own error for non-images
        apply_mask(b"GIF89a" + png[6:], plan, (40, 30))


@pytest.mark.parametrize(
    "url",
    [
        "https://shop.test/pay",
        "https://shop.test//pay/now",
        "https://SHOP.test/pay",
        "https://shop.test:443/pay",
        "https://shop.test./pay",
        "https://shop.test/%70ay",
        "https://shop.test/%70%61%79/now",
        "https://shop.test/x/../pay",
        "https://shop.test/./pay",
        "http://shop.test/pay",
        "https://shop.test:8443/pay",
        "https://sub.shop.test/pay/x?y#z",
        "https://shop.test/PAY",
        "https://shop.test/Pay/Now",
        "https://shop.test/%50ay",
    ],
)
def test_the_deny_list_matches_every_spelling_of_a_denied_page(url: str) -> None:
    assert deny_matches(url, ["https://shop.test/pay"]) == "https://shop.test/pay"


@pytest.mark.parametrize(
    "url",
    ["https://shop.test/", "https://shop.test/cart", "https://shop.test/%2Fpay", "about:blank"],
)
def test_other_pages_of_the_site_are_not_denied(url: str) -> None:
    assert deny_matches(url, ["https://shop.test/pay"]) is None


def test_international_hosts_match_in_either_form() -> None:
    assert deny_matches("https://bücher.test/", ["xn--bcher-kva.test"]) == "xn--bcher-kva.test"
    assert deny_matches("https://xn--bcher-kva.test/", ["xn--bcher-kva.test"]) is not None


def test_more_than_one_tab_masks_the_whole_image() -> None:
    plan = plan_mask(_probe(pages=2), [], (100, 80))

    assert plan.full and "2 tabs or popups are open" in plan.reason


def test_a_zoomed_page_masks_the_whole_image() -> None:
    plan = plan_mask(_probe(zoom=1.1), [], (100, 80))

    assert plan.full and "zoomed to 110%" in plan.reason
    assert not plan_mask(_probe(zoom=1.0), [], (100, 80)).full


def test_a_deny_listed_frame_masks_the_whole_image() -> None:
    probe = _probe(frame_urls=("https://ads.test/x", "https://SHOP.test:443//pay/now"))

    plan = plan_mask(probe, ["https://shop.test/pay"], (100, 80))

    assert plan.full and "a frame on the page is on the deny list" in plan.reason
    assert not plan_mask(_probe(frame_urls=("https://ads.test/",)), ["shop.test"], (9, 9)).full
