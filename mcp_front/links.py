"""Large images as resource links (issue 25 item 3).

A tool result's image over `[mcp] inline_image_max_bytes` is not sent inline: it is kept
here and the result carries a `resource_link` to it, which `resources/read` serves to the
conversation (the MCP session) that made it, and to no other: the key is the conversation
and a random URI, so another conversation of the same agent, or a guessed URI, gets "not
found". Kept for `KEEP_SECONDS`, at most `KEEP_BYTES` in all (the oldest go first), in
this process's memory only: nothing is written to disk, and a conversation that ends
takes its links with its process (stdio) or its session (HTTP, `forget`).
"""

from __future__ import annotations

import base64
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

import mcp_types as types

KEEP_SECONDS = 600.0
KEEP_BYTES = 64 * 1024 * 1024
SCHEME = "corral://image/"


class Kept(NamedTuple):
    conversation: str
    data: bytes
    mime_type: str
    made: float


class ImageLinks:
    def __init__(
        self,
        keep_seconds: float = KEEP_SECONDS,
        keep_bytes: int = KEEP_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keep_seconds = keep_seconds
        self.keep_bytes = keep_bytes
        self.clock = clock
        self._kept: OrderedDict[str, Kept] = OrderedDict()  # uri -> image, oldest first
        self._bytes = 0

    def put(self, conversation: str, data: bytes, mime_type: str) -> str:
        """Keep `data` for `conversation`; its URI."""
        self._expire()
        uri = f"{SCHEME}{secrets.token_urlsafe(18)}{_suffix(mime_type)}"
        self._kept[uri] = Kept(conversation, data, mime_type, self.clock())
        self._bytes += len(data)
        while self._bytes > self.keep_bytes and len(self._kept) > 1:
            self._drop(next(iter(self._kept)))
        return uri

    def get(self, conversation: str, uri: str) -> Kept | None:
        """The image behind `uri` if `conversation` made it and it is still kept."""
        self._expire()
        kept = self._kept.get(uri)
        if kept is None or kept.conversation != conversation:
            return None
        return kept

    def listed(self, conversation: str) -> list[tuple[str, Kept]]:
        self._expire()
        return [(uri, k) for uri, k in self._kept.items() if k.conversation == conversation]

    def forget(self, conversation: str) -> None:
        """Drop every image of a conversation that ended."""
        for uri in [u for u, k in self._kept.items() if k.conversation == conversation]:
            self._drop(uri)

    def _expire(self) -> None:
        oldest = self.clock() - self.keep_seconds
        while self._kept:
            uri, kept = next(iter(self._kept.items()))
            if kept.made > oldest:
                break
            self._drop(uri)

    def _drop(self, uri: str) -> None:
        kept = self._kept.pop(uri)
        self._bytes -= len(kept.data)


def _suffix(mime_type: str) -> str:
    return {"image/png": ".png", "image/jpeg": ".jpg"}.get(mime_type, "")


def linked(
    result: types.CallToolResult, limit: int, put: Callable[[bytes, str], str]
) -> types.CallToolResult:
    """`result` with each image over `limit` bytes replaced by a resource link (`put` keeps
    it and names its URI); a result with none is returned as it is."""
    content: list[types.ContentBlock] = []
    changed = False
    for block in result.content:
        if isinstance(block, types.ImageContent):
            data = base64.b64decode(block.data)
            if len(data) > limit:
                uri = put(data, block.mime_type)
                block = types.ResourceLink(
                    uri=uri,
                    name=uri.rsplit("/", 1)[-1],
                    mime_type=block.mime_type,
                    size=len(data),
                    description=f"The screenshot ({len(data)} bytes, over the {limit}-byte "
                    f"inline limit): read it with resources/read within {KEEP_SECONDS:.0f} s.",
                )
                changed = True
        content.append(block)
    if not changed:
        return result
    return result.model_copy(update={"content": content})


def read_result(uri: str, kept: Kept) -> types.ReadResourceResult:
    blob = base64.b64encode(kept.data).decode()
    return types.ReadResourceResult(
        contents=[types.BlobResourceContents(uri=uri, mime_type=kept.mime_type, blob=blob)]
    )
