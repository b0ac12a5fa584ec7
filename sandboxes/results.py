"""What each tool's structured content holds (issue 25 item 4): one model per result, whose
JSON Schema the MCP front lists as the tool's `outputSchema`.

Every successful result of a tool that has a model carries structured content of that
shape (an error result may carry none); a field added to an answer without its model is
a test failure, not a surprise for a client (`additionalProperties` is false). Every
input on a surface answers the surface's state after the action (`SurfaceState`, which
the action pipeline adds, once) and what the verb itself returned.
"""

from __future__ import annotations

from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from sandboxes.codrive import RunState
from sandboxes.ladder import Effect, Rung
from sandboxes.script_call import ScriptResult

SurfaceKind = Literal["kiosk", "browser", "desktop", "android", "ios"]


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


# execute_program: the script's result as `sandboxes.script_call.ScriptResult` holds it
# (one list of fields: the model is made from the dataclass).
ScriptRun: type[BaseModel] = create_model(
    "ScriptRun",
    __config__=ConfigDict(extra="forbid"),
    **{name: (kind, ...) for name, kind in get_type_hints(ScriptResult).items()},  # type: ignore[call-overload]
)


class SurfaceState(_Result):
    """A surface after an action: whose it is, its budget and its clocks."""

    surface: SurfaceKind
    surface_id: str  # the session or rig id
    controller: Literal["ai", "human"]
    actions_used: int
    max_actions: int
    idle_seconds_left: int
    lifetime_seconds_left: int
    approval: str | None = None  # the approval this action ran under, if a rule held it


class Shot(SurfaceState):
    """A screenshot's answer: the state, and what was masked."""

    masked: bool | None = None  # anything was masked
    mask_reason: str | None = None
    masked_fields: int | None = None
    scaled_from: list[int] | None = None  # max_width: the screen's size, and the image's
    scaled_to: list[int] | None = None


class BrowserAction(Shot):
    mode: str | None = None  # extract: what was extracted, and whether it was cut
    truncated: bool | None = None
    tabs: int | None = None  # tabs: how many are open, and the current one
    current: int | None = None


class PhoneAction(Shot):
    elements: int | None = None  # inspect: the elements found, and how many are secret
    secret_fields: int | None = None


class Device(_Result):
    device: str
    state: str
    held_by: Literal["you", "another agent"] | None


class Devices(_Result):
    """mobile_use devices: every configured device (no rig needed)."""

    devices: list[Device]


class ApprovalRules(_Result):
    confirm_urls: list[str]
    confirm_words: list[str]
    timeout_seconds: int


class SessionStarted(_Result):
    """computer_session_start: the session's limits and what it may open."""

    session_id: str
    max_actions: int
    idle_timeout_seconds: int
    max_lifetime_seconds: int
    navigable_sites: list[str]
    left_out: dict[str, str]  # allowlisted hosts left out, and why
    high_risk_confirmable: bool
    approval_rules: ApprovalRules
    chromium_sandbox: bool


class SessionStopped(_Result):
    session_id: str


class Rig(_Result):
    rig_id: str
    surface: SurfaceKind
    state: str
    screen: str
    device: str | None
    controller: Literal["ai", "human"]
    actions_used: int
    max_actions: int
    idle_seconds_left: int
    lifetime_seconds_left: int


class RigList(_Result):
    rigs: list[Rig]  # this conversation's
    others: int = 0  # rigs the agent's other conversations hold


class RigsClosed(_Result):
    closed: list[str]


class StepDone(_Result):
    index: int
    rung: Rung
    fell_through: list[str]
    effect: Effect
    outcome: str
    at: list[int] | None = None
    value: str | None = None  # what an api action read (untrusted)
    retried: bool | None = None


class CodriveRunResult(_Result):
    """codrive_run and codrive_status: the run (`run_id` null: there is none)."""

    run_id: str | None
    state: RunState | None
    target_app: str | None = None
    current_step: int | None = None
    current_try: int | None = None
    total_steps: int | None = None
    steps: list[StepDone] = Field(default_factory=list)
    reason: str | None = None


class RecordingListed(_Result):
    """One recording of the agent's own (`corral recordings list` shows them all)."""

    recording_id: str
    surface: str
    started_at: float
    ended_at: float | None  # None: still recorded, or its gateway was killed
    length_seconds: float
    frames: int
    actions: int
    approvals: int
    takeovers: int
    stopped: str | None  # why the recording stopped before its session ended


class RecordingList(_Result):
    recordings: list[RecordingListed]  # newest first


class RecordingGot(RecordingListed):
    """recording_get: the recording, its video and timeline as resource links."""

    video_uri: str | None  # None: no frame was taken
    timeline_uri: str


NO_RUN: dict[str, Any] = {"run_id": None, "state": None, "steps": []}


def output_schema(*models: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema a tool lists as its outputSchema: its model's, or any one of
    `models`'. Compact (it is in every tools/list): no titles, `[T, "null"]` types."""
    schemas = [model.model_json_schema() for model in models]
    defs = {name: d for schema in schemas for name, d in schema.pop("$defs", {}).items()}
    for one in (*schemas, *defs.values()):
        one.pop("description", None)  # the class docstrings: for readers of this file
    schema: dict[str, Any] = (
        schemas[0] if len(schemas) == 1 else {"type": "object", "anyOf": schemas}
    )
    if defs:
        schema["$defs"] = defs
    return dict(_compact(schema))


def _compact(node: Any) -> Any:
    if isinstance(node, list):
        return [_compact(value) for value in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: _compact(value)
        for key, value in node.items()
        if not (key == "title" and isinstance(value, str))
        and not (key == "default" and value is None)
    }
    options = out.get("anyOf")
    if (
        isinstance(options, list)
        and len(options) == 2
        and {"type": "null"} in options
        and all(set(o) == {"type"} and isinstance(o["type"], str) for o in options)
    ):
        del out["anyOf"]
        out["type"] = [o["type"] for o in options if o["type"] != "null"] + ["null"]
    return out
