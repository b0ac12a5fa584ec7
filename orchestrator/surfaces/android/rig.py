"""One Android rig (SPEC S4.1 `mobile_use`): a leased device behind corral's adb server
(`orchestrator.surfaces.android.adb`), driven with the device's own tools:
`uiautomator dump`, `input`,
`screencap -p` (over `exec:`), `pm`, `am`, `monkey`, pushed over `sync:`.

Installs come only from `[rigs.android] apk_dir`, by file name: the file is resolved
inside that directory (symlinks included) and refused if it leaves it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import anyio

from orchestrator.errors import DeviceError
from orchestrator.surfaces.android.adb import AndroidDevice
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.inputs import in_chunks
from orchestrator.surfaces.phones import MobileRig, device_output, done
from sandboxes import mobile_params as m
from sandboxes.masking import Rect, screen_size_error
from sandboxes.mobile_ui import UiTree, parse_android
from sandboxes.png import SIGNATURE as PNG_SIGNATURE

DUMP_PATH = "/sdcard/corral_window_dump.xml"
PUSH_PATH = "/data/local/tmp/corral-install.apk"
APK_MAX_BYTES = 512 * 1024 * 1024
_SIZE_RE = re.compile(r"(?:Override|Physical) size: (\d+)x(\d+)")


@dataclass(kw_only=True)
class AndroidRig(MobileRig):
    kind: ClassVar[str] = "android"

    dev: AndroidDevice | None = None
    apk_dir: str | None = None

    @property
    def adb(self) -> AndroidDevice:
        assert self.dev is not None
        return self.dev

    async def size(self) -> None:
        out = await self.adb.shell(["wm", "size"])
        sizes = _SIZE_RE.findall(out)
        if sizes:  # an override wins over the physical size (it is listed second)
            width, height = (int(v) for v in sizes[-1])
            if (why := screen_size_error((width, height))) is not None:
                raise DeviceError(f"the device's screen cannot be used: {why}")
            self.width, self.height = width, height

    async def dump(self) -> UiTree:
        await self.adb.shell(["uiautomator", "dump", DUMP_PATH])
        return parse_android(await self.adb.shell(["cat", DUMP_PATH]))

    async def _capture(self) -> bytes:
        png = await self.adb.exec_out(["screencap", "-p"])
        if not png.startswith(PNG_SIGNATURE):
            # an empty or cut answer: a device that went away says so here (DeviceError)
            state = await self.adb.state()
            if state != "device":
                raise DeviceError(f"device {self.device} is {state}", lost=True)
        return png

    async def _secrets(self) -> tuple[Rect, ...]:
        return (await self.dump()).secret_rects

    async def run(self, verb: m.AndroidVerb, status: str) -> Answer:
        with self.watched():
            return await self._run(verb, status)

    async def _run(self, verb: m.AndroidVerb, status: str) -> Answer:
        shell, src = self.adb.shell, f"the Android device {self.device}"
        if isinstance(verb, m.AndroidInspect):
            return await self.inspect(f"{src}'s UI", status)
        if isinstance(verb, m.AndroidScreenshot):
            return await self.masked_screenshot(self._capture, self._secrets, status)
        if isinstance(verb, m.AndroidTap):
            x, y, what = self.point(verb)
            await shell(["input", "tap", str(x), str(y)])
            return done(f"Tapped {what}.", status)
        if isinstance(verb, m.AndroidSwipe):
            coords = [verb.x, verb.y, verb.to_x, verb.to_y, verb.duration_ms]
            await shell(["input", "swipe", *map(str, coords)])
            return done(f"Swiped from {verb.x},{verb.y} to {verb.to_x},{verb.to_y}.", status)
        if isinstance(verb, m.AndroidText):
            await in_chunks(
                verb.text, lambda part: shell(["input", "text", input_text(part)]), self.ai_holds
            )
            return done(f"Typed {len(verb.text)} characters.", status)
        if isinstance(verb, m.AndroidKey):
            await shell(["input", "keyevent", f"KEYCODE_{verb.key}"])
            return done(f"Pressed {verb.key}.", status)
        if isinstance(verb, m.AndroidInstall):
            return await self._install(verb.file, status, src)
        if isinstance(verb, m.AndroidStart):
            out = await shell(
                ["monkey", "-p", verb.package, "-c", "android.intent.category.LAUNCHER", "1"]
            )
            if "No activities found" in out or "monkey aborted" in out:
                raise DeviceError(f"package: {verb.package} has no launcher activity here")
            return done(f"Started {verb.package}.", status)
        if isinstance(verb, m.AndroidStop):
            await shell(["am", "force-stop", verb.package])
            return done(f"Stopped {verb.package}.", status)
        if isinstance(verb, m.AndroidReset | m.AndroidUninstall):
            reset = isinstance(verb, m.AndroidReset)
            said = f"Cleared {verb.package}'s data." if reset else f"Uninstalled {verb.package}."
            out = await shell(["pm", "clear" if reset else "uninstall", verb.package])
            return _pm(out, said, status, src)
        if isinstance(verb, m.AndroidDeepLink):
            out = await shell(
                ["am", "start", "-W", "-a", "android.intent.action.VIEW", "-d", verb.url]
            )
            if "Error" in out:
                return device_output(out, src, status, "The link was not opened:")
            return done("Opened the link.", status)
        if isinstance(verb, m.AndroidCommand):
            out = await shell(list(verb.argv))
            return device_output(out, f"{src} ({verb.argv[0]})", status, f"Ran {verb.argv[0]}.")
        raise DeviceError(f"mobile_use has no handler for verb {verb.verb}")

    async def _install(self, name: str, status: str, src: str) -> Answer:
        path = await anyio.to_thread.run_sync(resolve_app, self.apk_dir, name, "apk_dir")
        size = path.stat().st_size
        if size > APK_MAX_BYTES:
            raise DeviceError(f"file: {name} is {size} bytes; at most {APK_MAX_BYTES}")
        data = await anyio.Path(path).read_bytes()
        await self.adb.push(data, PUSH_PATH)
        out = await self.adb.shell(["pm", "install", "-r", PUSH_PATH])
        await self.adb.shell(["rm", "-f", PUSH_PATH])
        return _pm(out, f"Installed {name}.", status, src)

    async def close(self) -> None:
        self.dev = None


def _pm(out: str, ok: str, status: str, src: str) -> Answer:
    if "Success" in out:
        return done(ok, status)
    return device_output(out, src, status, "The package manager refused:")


def input_text(text: str) -> str:
    """`input text` spells a space %s and takes printable ASCII only."""
    bad = next((c for c in text if not (" " <= c <= "~")), None)
    if bad is not None:
        raise DeviceError(
            f"text: Android's `input text` types printable ASCII only (got {bad!r}); "
            "split the text or use a paste in the app"
        )
    return text.replace(" ", "%s")


def resolve_app(directory: str | None, name: str, key: str) -> Path:
    """`name` inside the configured directory, refusing anything that leaves it."""
    if not directory:
        raise DeviceError(f"install is off: no {key} is configured (docs/rigs.md)")
    root = Path(directory).resolve()
    path = (root / name).resolve()
    if path.parent != root:
        raise DeviceError(f"file: {name} resolves outside the configured {key}; refused")
    if not path.exists():
        raise DeviceError(f"file: no {name} in the configured {key}")
    return path
