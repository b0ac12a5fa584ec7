"""The whole of `agents/<name>/agent.toml`: capabilities, their settings, permissions, and
the template `corral agents new` writes."""

from __future__ import annotations

import tomllib
from typing import Annotated, Any

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from orchestrator.config.fields import (
    AGENT_NAME_RE,
    ConfirmWord,
    DenyEntry,
    HostEntry,
    StrictModel,
    ToolPattern,
)
from sandboxes.approval_rules import DEFAULT_CONFIRM_WORDS


class ComputerUseConfig(StrictModel):
    max_actions: Annotated[int, Field(ge=1, le=10_000)] = 50
    # Host names computer_navigate may open, exactly (a subdomain is its own entry).
    allowed_domains: list[HostEntry] = Field(default_factory=list)
    # Pages whose screenshots are fully masked: host names (subdomains included) or URL prefixes.
    deny_list: list[DenyEntry] = Field(default_factory=list)
    idle_timeout_seconds: Annotated[int, Field(ge=5, le=3600)] = 600
    max_lifetime_seconds: Annotated[int, Field(ge=10, le=86_400)] = 3600
    # Pages whose opening waits for an operator (written like deny-list entries).
    confirm_urls: list[DenyEntry] = Field(default_factory=list, max_length=200)
    # A click whose target's accessible name contains one of these waits for an operator.
    confirm_words: list[ConfirmWord] = Field(
        default_factory=lambda: list(DEFAULT_CONFIRM_WORDS), max_length=200
    )


class Capabilities(StrictModel):
    """`[capabilities]`: every optional family is off for a new agent."""

    computer_use: bool = False
    codrive: bool = False
    browser_use: bool = False
    desktop_use: bool = False  # the desktop rig's computer_use tool (not the kiosk family)
    mobile_use: bool = False
    ios_use: bool = False
    recording: bool = False  # recording_list / recording_get: its own sessions' recordings
    read_only: bool = False
    # Tool patterns: a name, `mcp__corral__<name>`, or either ending in `*` (SPEC S5.2).
    allowed_tools: list[ToolPattern] = Field(default_factory=list)
    denied_tools: list[ToolPattern] = Field(default_factory=list)
    scoped_tools: list[ToolPattern] = Field(default_factory=list)
    computer_use_config: ComputerUseConfig = ComputerUseConfig()

    @model_validator(mode="before")
    @classmethod
    def _drop_os_native(cls, data: Any) -> Any:
        # `os_native` gated no tool and is gone; agent files written before (the template
        # had `os_native = false`) still load.
        if isinstance(data, dict) and "os_native" in data:
            return {k: v for k, v in data.items() if k != "os_native"}
        return data


class Permissions(StrictModel):
    """`[permissions]`: listed-but-refused gates. Everything is allowed unless turned off."""

    execute_program: bool = True


class AgentConfig(StrictModel):
    """The whole of `agents/<name>/agent.toml`."""

    name: str
    display_name: str = ""
    capabilities: Capabilities = Capabilities()
    permissions: Permissions = Permissions()

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not AGENT_NAME_RE.fullmatch(value):
            raise ValueError(
                "must be 1-63 characters: a lower-case letter, then lower-case letters, "
                "digits, '-' or '_'"
            )
        return value


NEW_AGENT_TEMPLATE = """\
# corral agent: {name}
# Every optional capability is off. Turn one on by setting it to true;
# see docs/operator.md for what each one allows.
name = "{name}"
display_name = ""

[capabilities]
computer_use = false
codrive = false
browser_use = false
desktop_use = false
mobile_use = false
ios_use = false
recording = false
read_only = false
allowed_tools = []
denied_tools = []
scoped_tools = []

[capabilities.computer_use_config]
max_actions = 50
allowed_domains = []

[permissions]
execute_program = true
"""


def render_new_agent(name: str) -> str:
    text = NEW_AGENT_TEMPLATE.format(name=name)
    # The template must itself be valid: a test relies on this round trip.
    AgentConfig.model_validate(tomllib.loads(text))
    return text
