"""The gateway's wire models: what `corral mcp` sends and what the gateway answers.

They live in the orchestrator (the gateway owns them); `mcp_front.forwarder` imports
them downward. docs/kiosk-internals.md section 1 describes the exchange.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.config import AGENT_NAME_RE

COMPUTER_USE_PATH = "/api/internal/computer-use"
ADMIN_APPROVALS_PATH = "/api/internal/admin/approvals"
ADMIN_DECIDE_PATH = "/api/internal/admin/approvals/decide"
ADMIN_SESSIONS_PATH = "/api/internal/admin/sessions"
ADMIN_SESSION_ACT_PATH = "/api/internal/admin/sessions/act"
OPERATOR_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,79}$")
_TOOL_RE = re.compile(r"computer_[a-z][a-z_]{0,62}", re.ASCII)


def gateway_base_url(host: str, port: int) -> str:
    """http://host:port for [gateway] host/port (IPv6 literals in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _Wire(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True
    )


class ComputerUseRequest(_Wire):
    """Body of POST /api/internal/computer-use."""

    agent: str
    tool: str
    arguments: dict[str, Any]

    @field_validator("agent")
    @classmethod
    def _agent(cls, value: str) -> str:
        if not AGENT_NAME_RE.fullmatch(value):
            raise ValueError("not a valid agent name")
        return value

    @field_validator("tool")
    @classmethod
    def _tool(cls, value: str) -> str:
        if not _TOOL_RE.fullmatch(value):
            raise ValueError("not a computer_* tool name")
        return value


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


def _operator(value: str) -> str:
    if not OPERATOR_NAME_RE.fullmatch(value):
        raise ValueError("1-80 characters: letters, digits, '_', '.', '@', ':' or '-'")
    return value


class AdminDecision(_Wire):
    """Body of POST /api/internal/admin/approvals/decide."""

    id: str = Field(min_length=1, max_length=64)
    decision: Literal["approve", "deny"]
    operator: str
    reason: str = Field(default="", max_length=500)

    _check_operator = field_validator("operator")(_operator)


class AdminSessionAct(_Wire):
    """Body of POST /api/internal/admin/sessions/act."""

    agent: str
    action: Literal["takeover", "handback", "stop"]
    operator: str

    _check_operator = field_validator("operator")(_operator)

    @field_validator("agent")
    @classmethod
    def _agent(cls, value: str) -> str:
        if not AGENT_NAME_RE.fullmatch(value):
            raise ValueError("not a valid agent name")
        return value
