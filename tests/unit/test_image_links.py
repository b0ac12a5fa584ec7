"""Large images as resource links (issue 25 item 3): the store serves an image to the
conversation that made it only, for a bounded time and size; a result's image over the
limit becomes a link, smaller ones stay inline. The wire path (a real client over stdio
and HTTP reading its link, another conversation refused) is
tests/e2e/test_resource_links.py."""

from __future__ import annotations

import base64

import mcp_types as types
import pytest

from mcp_front.links import SCHEME, ImageLinks, linked, read_result
from tests.fakes import FakeClock

pytestmark = pytest.mark.unit


def image(size: int) -> types.ImageContent:
    return types.ImageContent(data=base64.b64encode(b"x" * size).decode(), mime_type="image/png")


def test_an_image_is_served_to_its_conversation_only() -> None:
    links = ImageLinks()
    uri = links.put("conv-a", b"png bytes", "image/png")

    assert uri.startswith(SCHEME) and uri.endswith(".png")
    kept = links.get("conv-a", uri)
    assert kept is not None and kept.data == b"png bytes"
    assert links.get("conv-b", uri) is None
    assert links.get("conv-a", uri.replace(".png", "x.png")) is None
    assert [u for u, _ in links.listed("conv-a")] == [uri] and links.listed("conv-b") == []


def test_two_images_never_share_a_uri() -> None:
    links = ImageLinks()
    assert len({links.put("c", b"x", "image/png") for _ in range(200)}) == 200


def test_an_image_is_kept_for_a_bounded_time() -> None:
    clock = FakeClock()
    links = ImageLinks(keep_seconds=600, clock=clock)
    uri = links.put("c", b"x", "image/png")

    clock.now += 599
    assert links.get("c", uri) is not None
    clock.now += 2
    assert links.get("c", uri) is None


def test_the_oldest_images_go_first_when_the_bytes_are_spent() -> None:
    links = ImageLinks(keep_bytes=10)
    first = links.put("c", b"12345", "image/png")
    second = links.put("c", b"12345", "image/png")
    third = links.put("c", b"123", "image/png")

    assert links.get("c", first) is None
    assert links.get("c", second) is not None and links.get("c", third) is not None


def test_an_ended_conversation_takes_its_images_with_it() -> None:
    links = ImageLinks()
    mine = links.put("a", b"x", "image/png")
    theirs = links.put("b", b"y", "image/png")

    links.forget("a")

    assert links.get("a", mine) is None and links.get("b", theirs) is not None


def test_only_an_image_over_the_limit_becomes_a_link() -> None:
    links = ImageLinks()
    text = types.TextContent(text="Actions used: 1/9.")
    result = types.CallToolResult(content=[image(100), text, image(101)], is_error=False)

    out = linked(result, 100, lambda data, mime: links.put("c", data, mime))

    small, kept_text, link = out.content
    assert small == result.content[0] and kept_text == text
    assert isinstance(link, types.ResourceLink)
    assert link.mime_type == "image/png" and link.size == 101
    stored = links.get("c", link.uri)
    assert stored is not None and stored.data == b"x" * 101
    blob = read_result(link.uri, stored).contents[0]
    assert isinstance(blob, types.BlobResourceContents)
    assert base64.b64decode(blob.blob) == b"x" * 101


def test_a_result_without_a_large_image_is_returned_as_it_is() -> None:
    result = types.CallToolResult(content=[image(10)], is_error=False)
    assert linked(result, 100, lambda data, mime: "never") is result
