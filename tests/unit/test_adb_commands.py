"""The `mobile_use command` / `ios_use simctl` policy (sandboxes/adb_commands.py):
subcommands and their arguments, not whole binaries (issue 22 item 7). Pure: no device."""

from __future__ import annotations

import pytest

from orchestrator.errors import ParamError
from sandboxes.adb_commands import check_adb_command, check_simctl
from sandboxes.mobile_params import IosUseParams, MobileUseParams

pytestmark = [pytest.mark.unit, pytest.mark.mobile]

READ_ONLY = [
    ["getprop"],
    ["getprop", "ro.build.version.sdk"],
    ["dumpsys", "-l"],
    ["dumpsys", "battery"],
    ["dumpsys", "window", "windows"],
    ["dumpsys", "activity", "top"],
    ["dumpsys", "package", "com.example.notes"],
    ["dumpsys", "meminfo", "com.example.notes"],
    ["wm", "size"],
    ["wm", "density"],
    ["settings", "get", "secure", "default_input_method"],
    ["settings", "list", "global"],
    ["logcat", "-d"],
    ["logcat", "-d", "-t", "200", "-v", "time", "-b", "crash", "-s", "MyApp:E", "*:S"],
    ["pm", "list", "packages"],
    ["pm", "list", "packages", "-3", "-f"],
    ["pm", "list", "packages", "-3", "example"],
    ["pm", "list", "features"],
    ["pm", "path", "com.example.notes"],
    ["pm", "dump", "com.example.notes"],
    ["ps", "-A"],
    ["ps", "-o", "PID,NAME"],
    ["date"],
    ["date", "-u", "+%Y-%m-%dT%H:%M:%S"],
    ["df", "-h", "/data"],
]


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_every_read_only_form_offered_passes(argv: list[str]) -> None:
    assert check_adb_command(argv) == argv
    assert MobileUseParams.parse_verbs({"verb": "command", "argv": argv}).verb.argv == argv


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pm", "install", "/sdcard/evil.apk"], r"from apk_dir\); allowed: pm list packages"),
        (["pm", "install-create"], "install verb"),
        (["pm", "grant", "com.example.notes", "android.permission.CAMERA"], "never granted"),
        (["pm", "revoke", "com.example.notes", "android.permission.CAMERA"], "never granted"),
        (["pm", "uninstall", "com.example.notes"], "allowed: pm list packages"),
        (["pm", "clear", "com.example.notes"], "allowed: pm list packages"),
        (["pm", "disable-user", "com.example.notes"], "allowed: pm list packages"),
        (["settings", "put", "secure", "adb_enabled", "1"], "read, never written"),
        (["settings", "delete", "global", "x"], "read, never written"),
        (["settings", "get", "other", "x"], "allowed: settings get system|secure|global"),
        (["dumpsys", "notification", "--noredact"], "--noredact is never allowed"),
        (["dumpsys", "activity", "--NoRedact"], "--noredact is never allowed"),
        (["dumpsys", "notification"], "allowed: dumpsys -l"),
        (["dumpsys", "battery", "set", "level", "5"], "allowed: dumpsys -l"),
        (["dumpsys", "gfxinfo", "com.example.notes", "reset"], "allowed: dumpsys"),
        (["wm", "size", "100x100"], "allowed: wm size"),
        (["wm", "density", "120"], "allowed: wm size"),
        (["logcat"], "logcat needs -d"),
        (["logcat", "-d", "-c"], "allowed: logcat -d"),
        (["logcat", "-d", "-f", "/sdcard/x"], "allowed: logcat -d"),
        (["date", "010100002020"], r"allowed: date \[-u\]"),
        (["date", "-s", "20200101"], r"allowed: date \[-u\]"),
        (["df", "../x"], "allowed: df"),
        (["getprop", "a", "b"], r"allowed: getprop \[NAME\]"),
        (["am", "start", "-n", "com.x/.A"], "argv: 'am start"),
        (["sh", "-c", "id"], "argv: 'sh -c id' is not allowed"),
        (["getprop", "x;id"], "shell metacharacter"),
        (["getprop", "$(id)"], "shell metacharacter"),
        (["getprop", "a b"], "a space"),
        (["ps", "|", "sh"], "shell metacharacter"),
        (["getprop", "`id`"], "shell metacharacter"),
        (["getprop", "a&&b"], "shell metacharacter"),
        ([], "argv: give at least the binary"),
    ],
)
def test_writes_installs_grants_and_shell_syntax_are_refused_naming_argv(
    argv: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        check_adb_command(argv)
    assert str(caught.value).startswith("argv: ")


def test_a_refusal_through_the_verb_names_argv_and_the_forms_allowed() -> None:
    with pytest.raises(ParamError, match=r"argv: .*allowed: pm list packages"):
        MobileUseParams.parse_verbs({"verb": "command", "argv": ["pm", "grant", "a.b", "c"]})


@pytest.mark.parametrize(
    "argv",
    [
        ["listapps"],
        ["appinfo", "com.example.Shop"],
        ["get_app_container", "com.example.Shop", "data"],
        ["ui", "appearance"],
        ["ui", "appearance", "dark"],
        ["status_bar", "override", "--time", "9:41"],
        ["status_bar", "clear"],
        ["location", "set", "48.85,2.35"],
    ],
    ids=" ".join,
)
def test_ios_simctl_read_and_cosmetic_forms_pass(argv: list[str]) -> None:
    assert check_simctl(argv) == argv


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["privacy", "grant", "all", "com.example.Shop"], "'privacy' is not allowed"),
        (["privacy", "reset", "all"], "allowed:"),
        (["appinfo", "../x"], "allowed: appinfo BUNDLE"),
        (["ui", "content_size", "large"], r"allowed: ui appearance"),
        (["location", "run", "/tmp/x.gpx"], "allowed: location clear"),
        (["listapps", "extra"], "allowed: listapps"),
    ],
)
def test_ios_simctl_grants_and_other_forms_are_refused_naming_argv(
    argv: list[str], message: str
) -> None:
    with pytest.raises(ParamError, match=f"argv: .*{message}"):
        IosUseParams.parse_verbs({"verb": "simctl", "argv": argv})
