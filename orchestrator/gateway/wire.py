"""The gateway's wire models: what `corral mcp` sends and what the gateway answers.

They live in the orchestrator (the gateway owns them); `mcp_front.forwarder` imports
them downward. docs/kiosk-internals.md section 1 describes the exchange.

A request with `"stream": true` is answered 200 with `Content-Type: application/x-ndjson`:
one `CallEventLine` per line while the call runs (`progress`, `log`), then exactly one
`result` (the ComputerUseAnswer) or `error` line, then the end of the body
(docs/architecture.md, "Call events"). Refusals (401/403/413/400/503) stay plain JSON.
"""

from __future__ import annotations

import base64
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from orchestrator.config import AGENT_NAME_RE
from orchestrator.surfaces.answers import Answer, Text
from sandboxes.events import PROGRESS_OUTPUT_BYTES, LogLevel

COMPUTER_USE_PATH = "/api/internal/computer-use"
CONVERSATIONS_PATH = "/api/internal/conversations"
ADMIN_APPROVALS_PATH = "/api/internal/admin/approvals"
ADMIN_DECIDE_PATH = "/api/internal/admin/approvals/decide"
ADMIN_SESSIONS_PATH = "/api/internal/admin/sessions"
ADMIN_SESSION_ACT_PATH = "/api/internal/admin/sessions/act"
EVENTS_MEDIA_TYPE = "application/x-ndjson"
# The kiosk family (computer_*, which includes the desktop rig's computer_use) and the
# other rig tools (mobile ones included), and codrive's: the gateway runs these and nothing else.
_TOOL_RE = re.compile(
    r"computer_[a-z][a-z_]{0,62}|browser_use|mobile_use|ios_use|rig_list|rig_close"
    r"|codrive_run|codrive_status",
    re.ASCII,
)


def gateway_base_url(host: str, port: int) -> str:
    """http://host:port for [gateway] host/port (IPv6 literals in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _agent_name(value: str) -> str:
    if not AGENT_NAME_RE.fullmatch(value):
        raise ValueError("not a valid agent name")
    return value


_SEAT_KIND_RE = re.compile(r"[a-z]{1,20}(-[0-9a-f]{6})?")
CONVERSATION_RE = re.compile(r"c[0-9a-f]{16}")


def _seat_name(value: str) -> str:
    """A seat's name (orchestrator.surfaces.registry): AGENT, AGENT.KIND for a rig, or
    AGENT.KIND-XXXXXX for a conversation's rig."""
    agent, _, kind = value.partition(".")
    if not AGENT_NAME_RE.fullmatch(agent) or (kind and not _SEAT_KIND_RE.fullmatch(kind)):
        raise ValueError("not a seat name (AGENT, or AGENT.KIND as corral sessions list shows)")
    return value


def _conversation(value: str) -> str:
    if value and not CONVERSATION_RE.fullmatch(value):
        raise ValueError("not a conversation id (c and 16 hex digits)")
    return value


class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True
    )


class ComputerUseRequest(_Wire):
    """Body of POST /api/internal/computer-use."""

    agent: str
    tool: str
    arguments: dict[str, Any]
    stream: bool = False  # answer as NDJSON call events, the last one the result
    # The MCP conversation the call is from ("" for a caller naming none): its rigs are its
    # own and end with it (orchestrator.surfaces.conversations).
    conversation: str = ""

    _check_agent = field_validator("agent")(_agent_name)
    _check_conversation = field_validator("conversation")(_conversation)

    @field_validator("tool")
    @classmethod
    def _tool(cls, value: str) -> str:
        if not _TOOL_RE.fullmatch(value):
            raise ValueError("not a computer_*, rig or codrive tool name")
        return value


class ConversationLease(_Wire):
    """Body of POST /api/internal/conversations: which of the agent's conversations its MCP
    front still serves, and which ended (every LEASE_EVERY_SECONDS, and at its exit)."""

    agent: str
    live: list[str] = Field(default_factory=list, max_length=1024)
    ended: list[str] = Field(default_factory=list, max_length=1024)

    _check_agent = field_validator("agent")(_agent_name)

    @field_validator("live", "ended")
    @classmethod
    def _ids(cls, values: list[str]) -> list[str]:
        for value in values:
            if not CONVERSATION_RE.fullmatch(value):
                raise ValueError("not a conversation id (c and 16 hex digits)")
        return values


class TextBlock(_Wire):
    type: Literal["text"]
    text: str


class ImageBlock(_Wire):
    type: Literal["image"]
    data: str = Field(description="base64")
    mime_type: str = Field(alias="mimeType", pattern=r"^image/[a-z0-9.+-]{1,40}$")


Block = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]


class ComputerUseAnswer(_Wire):
    """The 200 answer: MCP-shaped content blocks, the error flag and structured content."""

    content: list[Block]
    is_error: bool = False
    structured: dict[str, Any] | None = None

    @classmethod
    def of(cls, answer: Answer) -> ComputerUseAnswer:
        """A handler's typed answer on the wire: the one place it is rendered (and checked:
        a malformed one raises ValidationError, the gateway's logged 500)."""
        blocks: list[TextBlock | ImageBlock] = [
            TextBlock(type="text", text=block.text)
            if isinstance(block, Text)
            else ImageBlock(
                type="image", data=base64.b64encode(block.png).decode(), mimeType=block.mime_type
            )
            for block in answer.content
        ]
        structured = None if answer.structured is None else dict(answer.structured)
        return cls(content=blocks, is_error=answer.is_error, structured=structured)


class AdminDecision(_Wire):
    """Body of POST /api/internal/admin/approvals/decide. Who decides is not in the body:
    it is the operator whose token the request carries."""

    id: str = Field(min_length=1, max_length=64)
    decision: Literal["approve", "deny"]
    reason: str = Field(default="", max_length=500)


class AdminSessionAct(_Wire):
    """Body of POST /api/internal/admin/sessions/act (the operator: as for AdminDecision)."""

    agent: str
    action: Literal["takeover", "handback", "stop"]

    _check_agent = field_validator("agent")(_seat_name)


class ProgressLine(_Wire):
    """A phase of the call, or how far it got (sandboxes.events.CallEvents.progress)."""

    kind: Literal["progress"]
    phase: str = Field(max_length=40)
    message: str = Field(max_length=500)
    remaining: float | None = Field(default=None, ge=0)
    output: str = Field(default="", max_length=PROGRESS_OUTPUT_BYTES)


class LogLine(_Wire):
    """One of corral's events for the caller (sandboxes.events.CallEvents.log)."""

    kind: Literal["log"]
    level: LogLevel
    event: str = Field(max_length=80)
    details: dict[str, Any] = Field(default_factory=dict)


class ResultLine(_Wire):
    kind: Literal["result"]
    answer: ComputerUseAnswer


class ErrorLine(_Wire):
    """The handler failed: the same reason a plain answer would carry with HTTP 500."""

    kind: Literal["error"]
    error: str


CallEventLine = Annotated[
    ProgressLine | LogLine | ResultLine | ErrorLine, Field(discriminator="kind")
]
CALL_EVENT_LINE: TypeAdapter[ProgressLine | LogLine | ResultLine | ErrorLine] = TypeAdapter(
    CallEventLine
)
