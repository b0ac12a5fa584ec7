"""Large screenshots as resource links, end to end (issue 25 item 3): a real MCP client ->
corral mcp -> gateway -> a kiosk container. With `[mcp] inline_image_max_bytes = 0` every
image comes back as a link; the conversation that made it reads it with resources/read,
another conversation of the same agent (a second HTTP session of the same server, or a
second stdio process) is told "not found". `max_width` scales the image after masking."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from PIL import Image

from orchestrator.agents.tokens import load_or_create_token
from orchestrator.home import CorralHome
from tests.e2e.conftest import AGENT, connect, serve_http
from tests.e2e.gateways import running_gateway
from tests.e2e.test_computer_use import text_of, write_agent

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EVERY_IMAGE_A_LINK = "[mcp]\ninline_image_max_bytes = 0\n"


def link_of(result: types.CallToolResult) -> types.ResourceLink:
    assert not any(isinstance(b, types.ImageContent) for b in result.content), text_of(result)
    links = [b for b in result.content if isinstance(b, types.ResourceLink)]
    assert len(links) == 1 and links[0].mime_type == "image/png", result.content
    return links[0]


async def read_png(client: Client, uri: str) -> Image.Image:
    read = await client.read_resource(uri)
    (blob,) = read.contents
    assert isinstance(blob, types.BlobResourceContents) and blob.mime_type == "image/png"
    return Image.open(io.BytesIO(base64.b64decode(blob.blob)))


@asynccontextmanager
async def http_session(url: str, home: CorralHome) -> AsyncIterator[Client]:
    bearer = {"Authorization": f"Bearer {load_or_create_token(home, AGENT)}"}
    async with (
        create_mcp_http_client(headers=bearer) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client


@pytest.fixture
async def kiosk_home(corral_home: CorralHome) -> AsyncIterator[CorralHome]:
    write_agent(corral_home, AGENT)
    async with running_gateway(corral_home, EVERY_IMAGE_A_LINK):
        yield corral_home


async def screenshot(client: Client, **arguments: Any) -> types.CallToolResult:
    result = await client.call_tool("computer_screenshot", arguments)
    assert not result.is_error, text_of(result)
    return result


async def test_a_link_is_read_by_its_http_session_and_not_by_another(
    kiosk_home: CorralHome,
) -> None:
    async with (
        serve_http(kiosk_home) as (url, _),
        http_session(url, kiosk_home) as mine,
        http_session(url, kiosk_home) as other,
    ):
        started = await mine.call_tool("computer_session_start", {})
        assert not started.is_error, text_of(started)
        link = link_of(await screenshot(mine))

        assert (await read_png(mine, link.uri)).size == (1280, 800)
        assert link.size is not None and link.size > 0
        assert [r.uri for r in (await mine.list_resources()).resources] == [link.uri]
        with pytest.raises(MCPError, match="Resource not found"):
            await other.read_resource(link.uri)
        assert (await other.list_resources()).resources == []

        small = await screenshot(mine, max_width=320)
        assert (await read_png(mine, link_of(small).uri)).size == (320, 200)
        assert small.structured_content is not None
        assert small.structured_content["scaled_from"] == [1280, 800]
        assert "Scaled from 1280x800 to 320x200" in text_of(small)
        await mine.call_tool("computer_session_stop", {})


async def test_a_link_is_not_read_by_another_stdio_conversation(kiosk_home: CorralHome) -> None:
    async with connect(kiosk_home, "stdio") as mine, connect(kiosk_home, "stdio") as other:
        started = await mine.client.call_tool("computer_session_start", {})
        assert not started.is_error, text_of(started)
        link = link_of(await screenshot(mine.client))

        assert (await read_png(mine.client, link.uri)).size == (1280, 800)
        with pytest.raises(MCPError, match="Resource not found"):
            await other.client.read_resource(link.uri)
        await mine.client.call_tool("computer_session_stop", {})
