"""Parameters of the rig tools (SPEC S4.1, S4.1a): a `verb` plus that verb's arguments.

Each verb is one pydantic model with a `verb` Literal; a tool's parameters are the
pydantic discriminated union of its verbs on `verb` (`VerbUnion`), so the parsed value
is typed: a driver narrows it by the verb's model. An unknown or missing verb is named
with the verbs allowed, and every other error names the verb and the parameter.
Elements of a page are addressed by a `ref` from the last `extract a11y` snapshot, or by
ARIA `role` + accessible `name`; never by CSS or XPath written by the model (a selector
language reaches into other engines: `xpath=`, `_react=`, `internal:` ..., which is more
than an agent needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Generic, Literal, Self, TypeVar, get_args

from pydantic import Field, RootModel, ValidationError, model_validator

from sandboxes.errors import ParamError
from sandboxes.keys import KeyVerdict, check_key, key_param
from sandboxes.params import TYPE_MAX_CHARS, Int, MaxWidth, Params, describe
from sandboxes.urls import check_url_size

ENGINES_REFUSED = {
    "firefox": "Playwright's Firefox build cannot be installed from this host's package "
    "sources (only Debian's Chromium can); use engine 'chromium'",
    "webkit": "Playwright's WebKit build cannot be installed from this host's package "
    "sources (only Debian's Chromium can); use engine 'chromium'",
}
REF_PATTERN = r"^(?:f[0-9]{1,4})?e[0-9]{1,7}$"
ROLE_PATTERN = r"^[a-z]{2,24}$"
CLIPBOARD_MAX_CHARS = 10_000

Ref = Annotated[
    str | None,
    Field(pattern=REF_PATTERN, description="Element ref from the last extract a11y, e.g. e12."),
]
Role = Annotated[
    str | None,
    Field(pattern=ROLE_PATTERN, description="ARIA role (button, link, textbox ...) with name."),
]
Name = Annotated[
    str | None,
    Field(min_length=1, max_length=256, description="Exact accessible name, with role."),
]


class _Verb(Params):
    verb: str


class _Target(_Verb):
    """An element: `ref`, or `role` + `name`; exactly one way."""

    ref: Ref = None
    role: Role = None
    name: Name = None

    @model_validator(mode="after")
    def _one_target(self) -> _Target:
        if self.ref is not None and (self.role is not None or self.name is not None):
            raise ValueError("ref: give either ref or role + name, not both")
        if self.ref is None and (self.role is None or self.name is None):
            raise ValueError("ref: required (or role and name together)")
        return self


class _Engine(_Verb):
    engine: Annotated[str, Field(description="Browser engine: chromium.")] = "chromium"

    @model_validator(mode="after")
    def _chromium_only(self) -> _Engine:
        if self.engine in ENGINES_REFUSED:
            raise ValueError(f"engine: {self.engine!r} is refused: {ENGINES_REFUSED[self.engine]}")
        if self.engine != "chromium":
            raise ValueError(f"engine: must be 'chromium' (got {self.engine!r})")
        return self


# ------------------------------------------------------------------ browser_use verbs


class _BrowserTarget(_Target, _Engine):
    pass


class BrowserNavigate(_Engine):
    verb: Literal["navigate"]
    url: Annotated[
        str,
        Field(min_length=1, description="navigate: https URL on an allowed host (<= 2000 bytes)."),
    ]

    @model_validator(mode="after")
    def _url_bytes(self) -> BrowserNavigate:
        check_url_size(self.url)
        return self


class BrowserClick(_BrowserTarget):
    verb: Literal["click"]
    double: Annotated[bool, Field(description="click: double-click.")] = False


class BrowserFill(_BrowserTarget):
    verb: Literal["fill"]
    text: Annotated[
        str,
        Field(max_length=TYPE_MAX_CHARS, description="fill/type/clipboard_set: the text."),
    ]


class BrowserPress(_Engine):
    verb: Literal["press"]
    key: Annotated[
        str,
        Field(min_length=1, max_length=64, description="press/key: an allowed key or chord."),
    ]

    @model_validator(mode="after")
    def _allowed_key(self) -> BrowserPress:
        key_param(self.key, "fill")
        return self

    @property
    def verdict(self) -> KeyVerdict:
        return check_key(self.key)


class BrowserSelect(_BrowserTarget):
    verb: Literal["select"]
    option: Annotated[
        str, Field(min_length=1, max_length=256, description="select: the option's label.")
    ]


class BrowserExtract(_Engine):
    verb: Literal["extract"]
    mode: Annotated[
        Literal["a11y", "text", "console"],
        Field(description="extract: a11y (snapshot with refs), text or console."),
    ] = "a11y"


class BrowserClipboardGet(_Engine):
    verb: Literal["clipboard_get"]


class BrowserClipboardSet(_Engine):
    verb: Literal["clipboard_set"]
    text: Annotated[str, Field(max_length=CLIPBOARD_MAX_CHARS)]


class ScreenshotVerb(_Verb):
    """`screenshot` on every rig: the masked screen, scaled to `max_width` if asked."""

    verb: Literal["screenshot"]
    max_width: MaxWidth = None


class BrowserScreenshot(ScreenshotVerb, _Engine):
    pass


class BrowserBack(_Engine):
    verb: Literal["back"]


class BrowserTabs(_Engine):
    verb: Literal["tabs"]
    select: Annotated[
        Int | None, Field(ge=0, le=19, description="tabs: switch to this tab index.")
    ] = None
    close: Annotated[Int | None, Field(ge=0, le=19, description="tabs: close this tab.")] = None

    @model_validator(mode="after")
    def _one_change(self) -> BrowserTabs:
        if self.select is not None and self.close is not None:
            raise ValueError("select: give select or close, not both")
        return self


# ------------------------------------------------------------------ computer_use (desktop)

X = Annotated[Int, Field(ge=0, le=1919, description="Pixels from the left edge.")]
Y = Annotated[Int, Field(ge=0, le=1199, description="Pixels from the top edge.")]


class DesktopMove(_Verb):
    verb: Literal["move"]
    x: X
    y: Y


class DesktopClick(_Verb):
    verb: Literal["click"]
    x: X
    y: Y
    button: Literal["left", "right", "middle"] = "left"
    double: bool = False


class DesktopDrag(_Verb):
    verb: Literal["drag"]
    x: X
    y: Y
    to_x: Annotated[Int, Field(ge=0, le=1919, description="drag: end point x.")]
    to_y: Annotated[Int, Field(ge=0, le=1199, description="drag: end point y.")]


class DesktopScroll(_Verb):
    verb: Literal["scroll"]
    x: X
    y: Y
    direction: Literal["up", "down", "left", "right"] = "down"
    amount: Annotated[Int, Field(ge=1, le=20, description="scroll: wheel steps, 1-20.")] = 3


class DesktopType(_Verb):
    verb: Literal["type"]
    text: Annotated[str, Field(min_length=1, max_length=TYPE_MAX_CHARS)]


class DesktopKey(_Verb):
    verb: Literal["key"]
    key: Annotated[str, Field(min_length=1, max_length=64)]

    @model_validator(mode="after")
    def _allowed_key(self) -> DesktopKey:
        key_param(self.key, "verb type")
        return self


class DesktopResize(_Verb):
    verb: Literal["resize"]
    window: Annotated[str, Field(min_length=1, max_length=256, description="resize: title.")]
    width: Annotated[Int, Field(ge=100, le=1920, description="resize: width, 100-1920.")]
    height: Annotated[Int, Field(ge=100, le=1200, description="resize: height, 100-1200.")]


class DesktopClipboardGet(_Verb):
    verb: Literal["clipboard_get"]


class DesktopClipboardSet(_Verb):
    verb: Literal["clipboard_set"]
    text: Annotated[str, Field(max_length=CLIPBOARD_MAX_CHARS)]


class DesktopScreenshot(ScreenshotVerb):
    pass


# ------------------------------------------------------------------ the unions


def by_verb(*models: type[_Verb]) -> dict[str, type[_Verb]]:
    """A union's verbs, keyed by each model's `verb` Literal."""
    return {get_args(m.model_fields["verb"].annotation)[0]: m for m in models}


V = TypeVar("V", bound=_Verb)
_TAG_ERRORS = frozenset({"union_tag_not_found", "union_tag_invalid"})


class VerbUnion(RootModel[V], Generic[V]):
    """A tool's parameters: one of its verbs, a pydantic discriminated union on `verb`
    (`VerbUnion[Annotated[A | B, Field(discriminator="verb")]]`). `parse_verbs` validates
    and names what is wrong; the advertised schema is an object (MCP needs one: a union's
    schema is a `oneOf` without `"type": "object"`) with `verb` and every verb's fields."""

    TOOL: ClassVar[str] = ""
    VERBS: ClassVar[Mapping[str, type[_Verb]]] = {}  # the union's members, by verb

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        members = get_args(cls.model_fields["root"].annotation)
        if members:
            cls.VERBS = by_verb(*members)

    @classmethod
    def parse_verbs(cls, arguments: Mapping[str, Any] | None) -> Self:
        args = dict(arguments or {})
        try:
            return cls.model_validate(args)
        except ValidationError as exc:
            raise ParamError(cls._describe(exc, args.get("verb"))) from exc

    @classmethod
    def _describe(cls, exc: ValidationError, verb: object) -> str:
        """The verb named with the verbs allowed, else that verb's bad parameters."""
        allowed = ", ".join(cls.VERBS)
        errors = exc.errors()
        if any(err["type"] in _TAG_ERRORS for err in errors):
            if verb is None:
                return f"verb: required, one of {allowed}"
            shown = repr(verb) if len(repr(verb)) <= 40 else "a long value"
            return f"verb: {cls.TOOL} has no verb {shown}; verbs: {allowed}"
        model = cls.VERBS[str(verb)]
        # the union puts the verb first in each location: the parameter is what follows
        inside = [{**err, "loc": err["loc"][1:]} for err in errors]
        return f"{describe(inside, model)} (verb {verb})"

    @property
    def verb(self) -> V:
        return self.root

    @classmethod
    def object_schema(cls) -> dict[str, Any]:
        properties: dict[str, Any] = {
            "verb": {"type": "string", "enum": list(cls.VERBS), "description": "What to do."}
        }
        defs: dict[str, Any] = {}
        for model in cls.VERBS.values():
            schema = model.model_json_schema()
            defs.update(schema.pop("$defs", {}))
            for name, prop in schema.get("properties", {}).items():
                if name == "verb" or name in properties:
                    continue
                prop.pop("title", None)
                properties[name] = prop
        schema = {
            "type": "object",
            "properties": properties,
            "required": ["verb"],
            "additionalProperties": False,
        }
        if defs:
            schema["$defs"] = defs
        return schema


BrowserVerb = Annotated[
    BrowserNavigate
    | BrowserClick
    | BrowserFill
    | BrowserPress
    | BrowserSelect
    | BrowserExtract
    | BrowserClipboardGet
    | BrowserClipboardSet
    | BrowserScreenshot
    | BrowserBack
    | BrowserTabs,
    Field(discriminator="verb"),
]
DesktopVerb = Annotated[
    DesktopMove
    | DesktopClick
    | DesktopDrag
    | DesktopScroll
    | DesktopType
    | DesktopKey
    | DesktopResize
    | DesktopClipboardGet
    | DesktopClipboardSet
    | DesktopScreenshot,
    Field(discriminator="verb"),
]


class BrowserUseParams(VerbUnion[BrowserVerb]):
    TOOL = "browser_use"


class DesktopUseParams(VerbUnion[DesktopVerb]):
    TOOL = "computer_use"


class RigCloseParams(Params):
    rig_id: Annotated[
        str | None,
        Field(max_length=64, description="Rig to destroy; default: every rig of yours."),
    ] = None
