"""What `mobile_use command` and `ios_use simctl` may run: subcommands and their
arguments, not whole binaries (issue 22 item 7, docs/rigs.md).

A whole binary is too much: `pm install /sdcard/x.apk` would install past `apk_dir`,
`pm grant` and `settings put secure ...` change the device, `dumpsys notification
--noredact` shows the text of every notification (one-time codes). So each binary has
a small grammar of read-only forms; anything else is refused with a message that names
`argv` and the forms allowed. No word may hold a shell metacharacter or a space, even
though corral quotes every word anyway (`shlex.join`): the policy does not lean on it.
Apps are installed only by the `install` verb, from the configured directory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

_WORD = re.compile(r"^[A-Za-z0-9._:/=+%,@-]*$")  # no shell syntax, no space, no glob
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")  # a property, settings key, filter
_PACKAGE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z][A-Za-z0-9_]*)+$")
_BUNDLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,154}$")
_NUMBER = re.compile(r"^[0-9]{1,6}$")
_LOG_FILTER = re.compile(r"^(?:\*|[A-Za-z0-9_.-]{1,64}):[VDIWEFS]$")  # TAG:LEVEL
_DATE_FORMAT = re.compile(r"^\+[%A-Za-z0-9:._,/-]{1,64}$")
_PATH = re.compile(r"^/[A-Za-z0-9._/-]{0,200}$")
_LATLON = re.compile(r"^-?[0-9]{1,3}(?:\.[0-9]{1,8})?,-?[0-9]{1,3}(?:\.[0-9]{1,8})?$")

NAMESPACES = ("system", "secure", "global")
# dumpsys: the services (and their read-only sections) an agent may dump. Not
# `notification` (its texts), not `battery set ...` or `deviceidle force-idle` (writes).
DUMPSYS_SECTIONS: Mapping[str, frozenset[str]] = {
    "activity": frozenset(
        {"activities", "top", "processes", "recents", "services", "broadcasts", "providers"}
    ),
    "window": frozenset({"windows", "displays", "policy", "tokens"}),
    "package": frozenset(),  # and `dumpsys package PKG`
    "meminfo": frozenset(),  # and `dumpsys meminfo PKG`
    "gfxinfo": frozenset(),  # and `dumpsys gfxinfo PKG` (not `reset`)
    "battery": frozenset(),
    "cpuinfo": frozenset(),
    "display": frozenset(),
    "input": frozenset(),
    "power": frozenset(),
    "uimode": frozenset(),
    "diskstats": frozenset(),
}
_DUMPSYS_PKG = frozenset({"package", "meminfo", "gfxinfo"})
PM_LIST_FLAGS = frozenset({"-f", "-d", "-e", "-s", "-3", "-i", "-u", "-U"})
PM_LISTS = ("packages", "features", "libraries", "users", "permission-groups")
LOG_BUFFERS = frozenset({"main", "system", "crash", "events"})
LOG_FORMATS = frozenset({"brief", "process", "tag", "thread", "raw", "time", "threadtime", "long"})

ANDROID_FORMS: Mapping[str, str] = {
    "getprop": "getprop [NAME]",
    "dumpsys": (
        "dumpsys -l | dumpsys SERVICE [SECTION] (services: "
        + ", ".join(sorted(DUMPSYS_SECTIONS))
        + "; sections: "
        + "; ".join(
            f"{name} {'|'.join(sorted(sections))}"
            for name, sections in DUMPSYS_SECTIONS.items()
            if sections
        )
        + "; package/meminfo/gfxinfo also take a PACKAGE; never --noredact)"
    ),
    "wm": "wm size | wm density (read only)",
    "settings": "settings get system|secure|global KEY | settings list system|secure|global",
    "logcat": "logcat -d [-t N] [-v FORMAT] [-b main|system|crash|events] [-s] [TAG:LEVEL ...]",
    "pm": (
        "pm list packages [-f -d -e -s -3 -i -u -U] [FILTER] | pm list "
        "features|libraries|users|permission-groups | pm path PACKAGE | pm dump PACKAGE"
    ),
    "ps": "ps [-A -e -f -l -T -o FIELDS] [PID|NAME ...]",
    "date": "date [-u] [+FORMAT]",
    "df": "df [-h|-k] [PATH ...]",
}
IOS_FORMS: Mapping[str, str] = {
    "listapps": "listapps",
    "appinfo": "appinfo BUNDLE",
    "get_app_container": "get_app_container BUNDLE [app|data|groups]",
    "ui": "ui appearance [light|dark]",
    "status_bar": "status_bar list|clear | status_bar override --FLAG VALUE ...",
    "location": "location clear | location set LAT,LON",
}
_WHY = {
    ("pm", "install"): "apps are installed by the install verb, from apk_dir",
    ("pm", "install-create"): "apps are installed by the install verb, from apk_dir",
    ("pm", "grant"): "permissions are never granted or revoked by an agent",
    ("pm", "revoke"): "permissions are never granted or revoked by an agent",
    ("settings", "put"): "settings are read, never written",
    ("settings", "delete"): "settings are read, never written",
    ("settings", "reset"): "settings are read, never written",
}


class _Refused(ValueError):
    pass


def _refuse(argv: list[str], forms: Mapping[str, str], why: str = "") -> _Refused:
    shown = " ".join(argv)[:80]
    head = argv[0]
    allowed = forms.get(head) or "; ".join(forms.values())
    reason = why or _WHY.get((head, argv[1] if len(argv) > 1 else ""), "")
    reason = reason or _WHY.get((head, ""), "")
    return _Refused(
        f"argv: {shown!r} is not allowed{' (' + reason + ')' if reason else ''}; allowed: {allowed}"
    )


def _getprop(args: list[str]) -> bool:
    return not args or (len(args) == 1 and bool(_NAME.fullmatch(args[0])))


def _dumpsys(args: list[str]) -> bool:
    if args == ["-l"]:
        return True
    if not args or args[0] not in DUMPSYS_SECTIONS or len(args) > 2:
        return False
    if len(args) == 1:
        return True
    service, rest = args
    return rest in DUMPSYS_SECTIONS[service] or (
        service in _DUMPSYS_PKG and bool(_PACKAGE.fullmatch(rest))
    )


def _wm(args: list[str]) -> bool:
    return args in (["size"], ["density"])


def _settings(args: list[str]) -> bool:
    if len(args) == 3 and args[0] == "get":
        return args[1] in NAMESPACES and bool(_NAME.fullmatch(args[2]))
    return len(args) == 2 and args[0] == "list" and args[1] in NAMESPACES


def _logcat(args: list[str]) -> bool:
    if "-d" not in args:
        return False
    rest = iter(args)
    for word in rest:
        if word in ("-d", "-s") or _LOG_FILTER.fullmatch(word):
            continue
        value = next(rest, "")
        ok = {
            "-t": _NUMBER.fullmatch(value),
            "-v": value in LOG_FORMATS,
            "-b": value in LOG_BUFFERS,
        }.get(word)
        if not ok:
            return False
    return True


def _pm(args: list[str]) -> bool:
    if len(args) == 2 and args[0] in ("path", "dump"):
        return bool(_PACKAGE.fullmatch(args[1]))
    if args[:2] == ["list", "packages"]:
        flags = [w for w in args[2:] if w.startswith("-")]
        names = [w for w in args[2:] if not w.startswith("-")]
        return (
            all(f in PM_LIST_FLAGS for f in flags)
            and len(names) <= 1
            and all(_NAME.fullmatch(n) for n in names)
        )
    return len(args) == 2 and args[0] == "list" and args[1] in PM_LISTS


def _ps(args: list[str]) -> bool:
    flags = re.compile(r"^-[AeflTo]+$")
    fields = re.compile(r"^[A-Za-z0-9_,%]{1,128}$")
    return all(flags.fullmatch(w) or _NAME.fullmatch(w) or fields.fullmatch(w) for w in args)


def _date(args: list[str]) -> bool:
    words = [w for w in args if w != "-u"]
    return len(args) - len(words) <= 1 and (
        not words or (len(words) == 1 and bool(_DATE_FORMAT.fullmatch(words[0])))
    )


def _df(args: list[str]) -> bool:
    return all(w in ("-h", "-k") or _PATH.fullmatch(w) for w in args)


_ANDROID: Mapping[str, Callable[[list[str]], bool]] = {
    "getprop": _getprop,
    "dumpsys": _dumpsys,
    "wm": _wm,
    "settings": _settings,
    "logcat": _logcat,
    "pm": _pm,
    "ps": _ps,
    "date": _date,
    "df": _df,
}


def _ios_ui(args: list[str]) -> bool:
    return args[:1] == ["appearance"] and args[1:] in ([], ["light"], ["dark"])


def _ios_status_bar(args: list[str]) -> bool:
    if args in (["list"], ["clear"]):
        return True
    pairs = args[1:]
    return (
        args[:1] == ["override"]
        and len(pairs) % 2 == 0
        and bool(pairs)
        and all(re.fullmatch(r"--[a-zA-Z]{1,32}", f) for f in pairs[::2])
        and all(re.fullmatch(r"[A-Za-z0-9:._-]{1,32}", v) for v in pairs[1::2])
    )


_IOS: Mapping[str, Callable[[list[str]], bool]] = {
    "listapps": lambda a: not a,
    "appinfo": lambda a: len(a) == 1 and bool(_BUNDLE.fullmatch(a[0])),
    "get_app_container": lambda a: (
        1 <= len(a) <= 2
        and bool(_BUNDLE.fullmatch(a[0]))
        and a[1:] in ([], ["app"], ["data"], ["groups"])
    ),
    "ui": _ios_ui,
    "status_bar": _ios_status_bar,
    "location": lambda a: (
        a == ["clear"] or (len(a) == 2 and a[0] == "set" and bool(_LATLON.fullmatch(a[1])))
    ),
}


def _check(
    argv: list[str],
    table: Mapping[str, Callable[[list[str]], bool]],
    forms: Mapping[str, str],
    what: str,
) -> list[str]:
    if not argv:
        raise ValueError(f"argv: give at least the {what}; allowed: {'; '.join(forms.values())}")
    for word in argv:
        if not _WORD.fullmatch(word) and not _LOG_FILTER.fullmatch(word):
            raise ValueError(
                f"argv: the word {word[:40]!r} holds a space, a shell metacharacter or a "
                "control character; allowed in a word: letters, digits and . _ : / = + % , @ -"
            )
    if any(w.lower() == "--noredact" for w in argv):
        raise _refuse(argv, forms, "--noredact is never allowed")
    if argv[0] == "logcat" and "-d" not in argv:
        raise _refuse(argv, forms, "logcat needs -d (dump and exit); it would never end")
    check = table.get(argv[0])
    if check is None:
        raise _refuse(argv, forms) from None
    if not check(argv[1:]):
        raise _refuse(argv, forms)
    return argv


def check_adb_command(argv: list[str]) -> list[str]:
    """`mobile_use command`'s argv, if it is one of `ANDROID_FORMS`; else ValueError."""
    return _check(argv, _ANDROID, ANDROID_FORMS, "binary")


def check_simctl(argv: list[str]) -> list[str]:
    """`ios_use simctl`'s argv (before corral puts the UDID in), if one of `IOS_FORMS`."""
    return _check(argv, _IOS, IOS_FORMS, "simctl subcommand")
