"""Parameters of `mobile_use` (Android over ADB) and `ios_use` (iOS Simulator over
WebDriverAgent), SPEC S4.1: a `verb` plus that verb's arguments, as in `rig_params`.

What reaches a device is built here from typed fields, never from a string the model
wrote for a shell: `command` and `simctl` take an argv of one of the read-only forms of
`sandboxes.adb_commands` (subcommands and arguments), every word is quoted by corral, and
an app is installed only from the configured directory, named by its file name (no
path, no `..`). Elements are addressed by a `ref` from the last `inspect`, or by x,y.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from sandboxes.adb_commands import ANDROID_FORMS, IOS_FORMS, check_adb_command, check_simctl
from sandboxes.params import TYPE_MAX_CHARS, Int, MaxWidth
from sandboxes.rig_params import VerbUnion, _Verb

MOBILE_REF_PATTERN = r"^e[0-9]{1,6}$"
PACKAGE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z][A-Za-z0-9_]*)+$"  # com.example.app
BUNDLE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9.-]{0,154}$"  # com.example.App
APP_FILE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,126}$"
DEEP_LINK_MAX_BYTES = 2000
ARG_MAX_CHARS = 256
ARGS_MAX = 32
# A deep link: a scheme (http, https or an app's own), then no spaces or control characters.
_LINK_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{0,31}:[^\s\x00-\x1f\x7f]+$")
_REFUSED_SCHEMES = frozenset({"file", "content", "javascript", "data", "intent"})

# `mobile_use command`: the binaries an agent may run on its device, each only in the
# read-only forms of `sandboxes.adb_commands` (docs/rigs.md). Each word is quoted too.
ADB_COMMANDS = frozenset(ANDROID_FORMS)
# `ios_use simctl`: subcommands that act on the configured simulator (its UDID is put
# in by corral, after the subcommand), in the forms of `sandboxes.adb_commands`: nothing
# that creates, erases or boots devices, and no `privacy` (grants).
SIMCTL_SUBCOMMANDS = frozenset(IOS_FORMS)
# Android key events `mobile_use key` may send (KEYCODE_ names without the prefix).
ANDROID_KEYS = frozenset(
    {
        "HOME",
        "BACK",
        "APP_SWITCH",
        "ENTER",
        "DEL",
        "FORWARD_DEL",
        "TAB",
        "ESCAPE",
        "SPACE",
        "DPAD_UP",
        "DPAD_DOWN",
        "DPAD_LEFT",
        "DPAD_RIGHT",
        "DPAD_CENTER",
        "VOLUME_UP",
        "VOLUME_DOWN",
        "MENU",
        "SEARCH",
        "MOVE_HOME",
        "MOVE_END",
        "PAGE_UP",
        "PAGE_DOWN",
    }
)

MX = Annotated[Int, Field(ge=0, le=7999, description="Device pixels (Android) or points (iOS).")]
MobileRef = Annotated[
    str | None,
    Field(pattern=MOBILE_REF_PATTERN, description="Element ref from the last inspect, e.g. e7."),
]
Package = Annotated[
    str, Field(pattern=PACKAGE_PATTERN, max_length=255, description="Android package name.")
]
Bundle = Annotated[
    str, Field(pattern=BUNDLE_PATTERN, description="iOS bundle id, e.g. com.example.App.")
]
AppFile = Annotated[
    str,
    Field(
        pattern=APP_FILE_PATTERN,
        description="install: a file name in the configured app directory (no path).",
    ),
]


def _app_file(endings: tuple[str, ...], what: str) -> AfterValidator:
    """An `install` file: one of `endings`, no `..` (the name alone is checked by the
    pattern; the directory is corral's)."""

    def check(value: str) -> str:
        if not value.endswith(endings) or ".." in value:
            raise ValueError(f"file: must be {what}")
        return value

    return AfterValidator(check)


ApkFile = Annotated[AppFile, _app_file((".apk",), "an .apk file name in the configured apk_dir")]
IosAppFile = Annotated[
    AppFile, _app_file((".app", ".ipa"), "an .app or .ipa name in the configured app_dir")
]


class _Point(_Verb):
    """x,y or a ref from the last inspect: exactly one way."""

    ref: MobileRef = None
    x: MX | None = None
    y: MX | None = None

    @model_validator(mode="after")
    def _one_target(self) -> _Point:
        has_xy = self.x is not None or self.y is not None
        if self.ref is not None and has_xy:
            raise ValueError("ref: give either ref or x and y, not both")
        if self.ref is None and (self.x is None or self.y is None):
            raise ValueError("x: required with y (or give ref)")
        return self


class _Swipe(_Verb):
    verb: Literal["swipe"]
    x: MX
    y: MX
    to_x: Annotated[Int, Field(ge=0, le=7999, description="swipe: end point x.")]
    to_y: Annotated[Int, Field(ge=0, le=7999, description="swipe: end point y.")]
    duration_ms: Annotated[Int, Field(ge=50, le=5000, description="swipe: 50-5000 ms.")] = 300


class _Text(_Verb):
    verb: Literal["text"]
    text: Annotated[
        str, Field(min_length=1, max_length=TYPE_MAX_CHARS, description="text: what to type.")
    ]


class _DeepLink(_Verb):
    verb: Literal["deep_link"]
    url: Annotated[str, Field(min_length=3, description="deep_link: the URL (<= 2000 bytes).")]

    @field_validator("url")
    @classmethod
    def _link(cls, value: str) -> str:
        return check_link(value)


def check_link(url: str) -> str:
    size = len(url.encode())
    if size > DEEP_LINK_MAX_BYTES:
        raise ValueError(f"url: at most {DEEP_LINK_MAX_BYTES} bytes (got {size})")
    if not _LINK_RE.fullmatch(url):
        raise ValueError("url: must be scheme:rest with no spaces or control characters")
    scheme = url.split(":", 1)[0].lower()
    if scheme in _REFUSED_SCHEMES:
        raise ValueError(f"url: the {scheme}: scheme is refused (it reaches files or code)")
    return url


def check_argv(argv: list[str], allowed: frozenset[str], what: str) -> list[str]:
    if not argv:
        raise ValueError(f"argv: give at least the {what}")
    if argv[0] not in allowed:
        raise ValueError(
            f"argv: {argv[0][:40]!r} is not allowed; allowed: {', '.join(sorted(allowed))}"
        )
    for word in argv:
        if "\x00" in word or "\n" in word:
            raise ValueError("argv: a word may not contain NUL or a newline")
    return argv


Argv = Annotated[
    list[Annotated[str, Field(max_length=ARG_MAX_CHARS)]],
    Field(min_length=1, max_length=ARGS_MAX, description="command/simctl: argv, not a shell line."),
]

# ------------------------------------------------------------------ mobile_use (Android)


class AndroidDevices(_Verb):
    verb: Literal["devices"]


class AndroidInspect(_Verb):
    verb: Literal["inspect"]


class AndroidTap(_Point):
    verb: Literal["tap"]


class AndroidSwipe(_Swipe):
    pass


class AndroidText(_Text):
    pass


class AndroidKey(_Verb):
    verb: Literal["key"]
    key: Annotated[str, Field(min_length=1, max_length=32, description="key: e.g. BACK, HOME.")]

    @field_validator("key")
    @classmethod
    def _allowed(cls, value: str) -> str:
        name = value.removeprefix("KEYCODE_")
        if name not in ANDROID_KEYS:
            raise ValueError(
                f"key: {value[:40]!r} is not allowed; allowed: {', '.join(sorted(ANDROID_KEYS))}"
            )
        return name


class AndroidScreenshot(_Verb):
    verb: Literal["screenshot"]
    max_width: MaxWidth = None


class AndroidInstall(_Verb):
    verb: Literal["install"]
    file: ApkFile


class AndroidStart(_Verb):
    verb: Literal["start"]
    package: Package


class AndroidStop(_Verb):
    verb: Literal["stop"]
    package: Package


class AndroidReset(_Verb):
    verb: Literal["reset"]
    package: Package


class AndroidUninstall(_Verb):
    verb: Literal["uninstall"]
    package: Package


class AndroidDeepLink(_DeepLink):
    pass


class AndroidCommand(_Verb):
    verb: Literal["command"]
    argv: Argv

    @field_validator("argv")
    @classmethod
    def _allowed(cls, value: list[str]) -> list[str]:
        return check_adb_command(check_argv(value, ADB_COMMANDS, "binary"))


AndroidVerb = Annotated[
    AndroidDevices
    | AndroidInspect
    | AndroidTap
    | AndroidSwipe
    | AndroidText
    | AndroidKey
    | AndroidScreenshot
    | AndroidInstall
    | AndroidStart
    | AndroidStop
    | AndroidReset
    | AndroidUninstall
    | AndroidDeepLink
    | AndroidCommand,
    Field(discriminator="verb"),
]


class MobileUseParams(VerbUnion[AndroidVerb]):
    TOOL = "mobile_use"


# ------------------------------------------------------------------ ios_use


class IosInspect(_Verb):
    verb: Literal["inspect"]


class IosTap(_Point):
    verb: Literal["tap"]


class IosSwipe(_Swipe):
    pass


class IosText(_Text):
    pass


class IosPressButton(_Verb):
    verb: Literal["press_button"]
    button: Annotated[
        Literal["home", "volumeUp", "volumeDown"],
        Field(description="press_button: home, volumeUp or volumeDown."),
    ]


class IosScreenshot(_Verb):
    verb: Literal["screenshot"]
    max_width: MaxWidth = None


class IosInstall(_Verb):
    verb: Literal["install"]
    file: IosAppFile


class IosLaunch(_Verb):
    verb: Literal["launch"]
    bundle_id: Bundle


class IosTerminate(_Verb):
    verb: Literal["terminate"]
    bundle_id: Bundle


class IosUninstall(_Verb):
    verb: Literal["uninstall"]
    bundle_id: Bundle


class IosDeepLink(_DeepLink):
    pass


class IosSimctl(_Verb):
    verb: Literal["simctl"]
    argv: Argv

    @field_validator("argv")
    @classmethod
    def _allowed(cls, value: list[str]) -> list[str]:
        return check_simctl(check_argv(value, SIMCTL_SUBCOMMANDS, "simctl subcommand"))


IosVerb = Annotated[
    IosInspect
    | IosTap
    | IosSwipe
    | IosText
    | IosPressButton
    | IosScreenshot
    | IosInstall
    | IosLaunch
    | IosTerminate
    | IosUninstall
    | IosDeepLink
    | IosSimctl,
    Field(discriminator="verb"),
]


class IosUseParams(VerbUnion[IosVerb]):
    TOOL = "ios_use"


# Verbs that count against the action budget (reads and listings do not).
MOBILE_COUNTED = frozenset(
    {"tap", "swipe", "text", "key", "install", "start", "stop", "reset", "uninstall"}
    | {"deep_link", "command", "press_button", "launch", "terminate", "simctl"}
)
