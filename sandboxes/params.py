"""Parameter models of every tool, validated at the edge (SPEC S2.3-S2.7, S3.1, S1.8).

Integers and booleans also accept numeric strings and "true"/"false" (S2.7):
pydantic's lax mode does that. Nothing is clamped: out of range is an error
that names the parameter and the allowed range (see `describe_errors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, get_args

import annotated_types
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from sandboxes.errors import ParamError
from sandboxes.keys import KeyVerdict, key_param
from sandboxes.script_policy import ExecuteProgramParams, parse_params
from sandboxes.urls import check_url_size

__all__ = ["ExecuteProgramParams", "ParamError", "validate"]

TYPE_MAX_CHARS = 2000


def _not_bool(value: object) -> object:
    # "12" and 12 are integers (S2.7); true/false are not.
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]


MAX_WIDTH_MIN, MAX_WIDTH_MAX = 64, 8192
# Every screenshot's optional down-scaling (sandboxes.image_size).
MaxWidth = Annotated[
    Annotated[Int, Field(ge=MAX_WIDTH_MIN, le=MAX_WIDTH_MAX)] | None,
    Field(
        description="Scale the screenshot down to at most this many pixels wide (aspect kept, "
        f"masked first), {MAX_WIDTH_MIN}-{MAX_WIDTH_MAX}.",
    ),
]


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(Params):
    pass


class ScreenshotParams(Params):
    max_width: MaxWidth = None


class SessionStartParams(Params):
    task: Annotated[str | None, Field(max_length=2000, description="What the session is for.")] = (
        None
    )
    width: Annotated[Int, Field(ge=320, le=1920, description="Screen width, 320-1920.")] = 1280
    height: Annotated[Int, Field(ge=240, le=1200, description="Screen height, 240-1200.")] = 800


Coordinate = Annotated[Int, Field(ge=0, le=1919, description="Pixels from the left/top edge.")]


class ClickParams(Params):
    x: Coordinate
    y: Annotated[Int, Field(ge=0, le=1199, description="Pixels from the top edge.")]
    button: Literal["left", "right"] = "left"
    double: Annotated[bool, Field(description="Double-click; left button only.")] = False

    @model_validator(mode="after")
    def _double_left_only(self) -> ClickParams:
        if self.double and self.button != "left":
            raise ValueError("double: a double click is only allowed with button 'left'")
        return self


class TypeParams(Params):
    text: Annotated[
        str,
        Field(
            min_length=1,
            max_length=TYPE_MAX_CHARS,
            description="Text to type, 1-2000 characters. Only its length is audited.",
        ),
    ]


class KeyParams(Params):
    key: Annotated[
        str,
        Field(
            min_length=1,
            max_length=64,
            description="An allowed key or chord: a letter, digit, Return, Tab, Escape, "
            "arrows, ctrl+c ... (docs/tools.md).",
        ),
    ]

    _verdict: KeyVerdict = PrivateAttr()

    @model_validator(mode="after")
    def _allowed_key(self) -> KeyParams:
        self._verdict = key_param(self.key)  # decided once, here; the session presses its key
        return self

    @property
    def verdict(self) -> KeyVerdict:
        return self._verdict


class ScrollParams(Params):
    x: Coordinate
    y: Annotated[Int, Field(ge=0, le=1199, description="Pixels from the top edge.")]
    direction: Literal["up", "down"] = "down"
    amount: Annotated[Int, Field(ge=1, le=20, description="Wheel steps, 1-20.")] = 3


class NavigateParams(Params):
    url: Annotated[
        str,
        Field(
            min_length=1,
            description="https:// URL on an allowed host, port 443, no user info, <= 2000 bytes.",
        ),
    ]

    @model_validator(mode="after")
    def _url_bytes(self) -> NavigateParams:
        check_url_size(self.url)
        return self


class RecordingGetParams(Params):
    recording_id: Annotated[
        str,
        Field(
            min_length=1,
            max_length=64,
            pattern=r"^[a-z0-9][a-z0-9-]*$",
            description="A recording's id, from recording_list.",
        ),
    ]


class SessionStopParams(Params):
    session_id: Annotated[
        str | None, Field(max_length=64, description="Session to stop; default: yours.")
    ] = None


_RANGE_ERRORS = {
    "greater_than_equal",
    "less_than_equal",
    "greater_than",
    "less_than",
    "string_too_short",
    "string_too_long",
    "too_short",
    "too_long",
}


def _optional_metadata(annotation: Any) -> list[Any]:
    """The constraints of `Annotated[T, Field(...)] | None` (pydantic keeps them inside the
    union's member, not on the field)."""
    found: list[Any] = []
    for arg in get_args(annotation):
        for meta in getattr(arg, "__metadata__", ()):
            found += list(getattr(meta, "metadata", [meta]))
    return found


def _field_bounds(model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[Any, Any] | None:
    """(low, high) declared on the field at `loc`, walking into nested models and lists."""
    current: Any = model
    info = None
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = current.model_fields.get(part)
        if info is None:
            return None
        current = info.annotation
        for arg in get_args(current) or ():
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                current = arg
    if info is None:
        return None
    low = high = None
    for meta in [*info.metadata, *_optional_metadata(info.annotation)]:
        if isinstance(meta, annotated_types.Ge | annotated_types.Gt):
            low = getattr(meta, "ge", getattr(meta, "gt", None))
        elif isinstance(meta, annotated_types.Le | annotated_types.Lt):
            high = getattr(meta, "le", getattr(meta, "lt", None))
        elif isinstance(meta, annotated_types.MinLen):
            low = meta.min_length
        elif isinstance(meta, annotated_types.MaxLen):
            high = meta.max_length
    return low, high


def _shown(value: object) -> str:
    """The rejected value, shortened: an error must not echo a long input back."""
    if isinstance(value, str | list | dict) and len(value) > 40:
        return f"{type(value).__name__} of length {len(value)}"
    return repr(value)


def describe_errors(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One clause per bad parameter: `name: problem (got value)`; ranges are named whole."""
    return describe(exc.errors(), model)


def describe(errors: Iterable[Mapping[str, Any]], model: type[BaseModel] | None = None) -> str:
    """`describe_errors` for pydantic's error details (`ValidationError.errors()`)."""
    parts = []
    for err in errors:
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        msg = err["msg"].removeprefix("Value error, ")
        got = _shown(err.get("input"))
        bounds = _field_bounds(model, err["loc"]) if model is not None else None
        if err["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown parameter")
        elif err["type"] == "missing":
            parts.append(f"{loc}: required")
        elif err["type"] in _RANGE_ERRORS and bounds is not None and None not in bounds:
            low, high = bounds
            unit = "" if err["type"].startswith(("greater", "less")) else " long (characters/items)"
            parts.append(f"{loc}: must be from {low} to {high}{unit} (got {got})")
        elif msg.startswith(f"{loc}:"):
            parts.append(msg)
        elif ":" in msg.split(" ")[0]:  # a model's own check naming its field(s)
            # inside a list (codrive's steps), say which item: `steps.3.text: ...`
            parts.append(f"{loc}.{msg}" if err["loc"] else msg)
        else:
            parts.append(f"{loc}: {msg} (got {got})")
    return "; ".join(parts)


def validate(model: type[BaseModel], arguments: Mapping[str, Any] | None) -> BaseModel:
    """Validate raw arguments against `model`; raise ParamError naming what is wrong."""
    if model is ExecuteProgramParams:
        return parse_params(arguments or {})
    parse_verbs = getattr(model, "parse_verbs", None)
    if parse_verbs is not None:  # a rig tool: `verb` plus that verb's arguments
        parsed: BaseModel = parse_verbs(arguments)
        return parsed
    try:
        return model.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        raise ParamError(describe_errors(exc, model)) from exc
