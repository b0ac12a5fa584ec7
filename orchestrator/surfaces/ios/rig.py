"""One iOS rig (SPEC S4.1 `ios_use`): a WebDriverAgent session on the configured
simulator (`[rigs.ios] wda_url`), plus `xcrun simctl` for what WDA does not do
(install, uninstall, the allowlisted `simctl` verb) when the host is macOS.

WDA measures in points and screenshots are in pixels: secret fields
(`XCUIElementTypeSecureTextField`) are scaled by the screenshot's width over the
window's before they are masked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import anyio

from orchestrator.errors import DeviceError
from orchestrator.surfaces.android.rig import resolve_app
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.inputs import in_chunks
from orchestrator.surfaces.ios.wda import WdaClient, simctl
from orchestrator.surfaces.phones import MobileRig, device_output, done
from sandboxes import mobile_params as m
from sandboxes.masking import Rect, png_size
from sandboxes.mobile_ui import UiTree, parse_ios, scale_rects


@dataclass(kw_only=True)
class IosRig(MobileRig):
    kind: ClassVar[str] = "ios"

    wda: WdaClient | None = None
    udid: str | None = None
    app_dir: str | None = None
    timeout: float = 30.0
    scale: float | None = None  # screenshot pixels per point, learnt from a capture

    @property
    def client(self) -> WdaClient:
        assert self.wda is not None
        return self.wda

    async def dump(self) -> UiTree:
        return parse_ios(await self.client.source())

    async def _secrets(self) -> tuple[Rect, ...]:
        return scale_rects((await self.dump()).secret_rects, self.scale or 1.0)

    async def _capture(self) -> bytes:
        png = await self.client.screenshot()
        size = png_size(png)
        if size is not None and self.width:
            self.scale = size[0] / self.width
        return png

    async def run(self, verb: m.IosVerb, status: str) -> Answer:
        with self.watched():
            return await self._run(verb, status)

    def _udid(self) -> str:
        if not self.udid:
            raise DeviceError("this verb needs [rigs.ios] simulator_udid (docs/rigs.md)")
        return self.udid

    async def _run(self, verb: m.IosVerb, status: str) -> Answer:
        wda, src = self.client, "the iOS simulator"
        if isinstance(verb, m.IosInspect):
            return await self.inspect(f"{src}'s UI", status)
        if isinstance(verb, m.IosScreenshot):
            # the scale is learnt from a first capture, then the secrets are measured
            if self.scale is None:
                await self._capture()
            return await self.masked_screenshot(self._capture, self._secrets, status)
        if isinstance(verb, m.IosTap):
            x, y, what = self.point(verb)
            await wda.tap(x, y)
            return done(f"Tapped {what}.", status)
        if isinstance(verb, m.IosSwipe):
            await wda.drag(verb.x, verb.y, verb.to_x, verb.to_y, verb.duration_ms / 1000)
            return done(f"Swiped from {verb.x},{verb.y} to {verb.to_x},{verb.to_y}.", status)
        if isinstance(verb, m.IosText):
            await in_chunks(verb.text, wda.keys, self.ai_holds)
            return done(f"Typed {len(verb.text)} characters.", status)
        if isinstance(verb, m.IosPressButton):
            await wda.press_button(verb.button)
            return done(f"Pressed {verb.button}.", status)
        if isinstance(verb, m.IosLaunch):
            await wda.launch(verb.bundle_id)
            return done(f"Launched {verb.bundle_id}.", status)
        if isinstance(verb, m.IosTerminate):
            was = await wda.terminate(verb.bundle_id)
            return done(
                f"Terminated {verb.bundle_id}." if was else f"{verb.bundle_id} was not running.",
                status,
            )
        if isinstance(verb, m.IosDeepLink):
            await wda.open_url(verb.url)
            return done("Opened the link.", status)
        if isinstance(verb, m.IosInstall):
            path = await anyio.to_thread.run_sync(resolve_app, self.app_dir, verb.file, "app_dir")
            await simctl(["install", self._udid(), str(path)], self.timeout)
            return done(f"Installed {verb.file}.", status)
        if isinstance(verb, m.IosUninstall):
            await simctl(["uninstall", self._udid(), verb.bundle_id], self.timeout)
            return done(f"Uninstalled {verb.bundle_id}.", status)
        if isinstance(verb, m.IosSimctl):
            sub, *rest = verb.argv
            out = await simctl([sub, self._udid(), *rest], self.timeout)
            return device_output(out, f"{src} (simctl {sub})", status, f"Ran simctl {sub}.")
        raise DeviceError(f"ios_use has no handler for verb {verb.verb}")

    async def close(self) -> None:
        wda, self.wda = self.wda, None
        if wda is not None:
            await wda.close()
