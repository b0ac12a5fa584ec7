"""One browser rig (SPEC S4.1): Debian's headless Chromium in a locked-down container,
driven by Playwright over the CDP channel of `orchestrator.surfaces.browser.cdp`.

Elements are found by `ref` (Playwright's `aria-ref=` engine, from the last
`extract a11y` snapshot) or by ARIA role + exact accessible name; the model never
writes a selector. Every piece of text read from the page comes back fenced as
untrusted data (`sandboxes.fence`). Secret fields are found by the kiosk's own probe
(`sandboxes.secret_fields`, through `browser/secrets.py`): screenshots mask them with
`sandboxes.masking`, as the kiosk's are (denied pages whole), and `extract` withholds
their values.
"""

from __future__ import annotations

import base64
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio
from PIL.Image import Image
from playwright.async_api import Browser, BrowserContext, ConsoleMessage, Page
from playwright.async_api import Error as PlaywrightError

from orchestrator.backends.admission import capture_slot
from orchestrator.errors import RefGone, RigError, SessionRefused
from orchestrator.recordings.recorder import Frame
from orchestrator.surfaces.answers import Answer, answer, image_answer, text_block
from orchestrator.surfaces.base import Surface, proxy_alive
from orchestrator.surfaces.browser import aria, reading
from orchestrator.surfaces.browser.at_once import both
from orchestrator.surfaces.browser.cdp import CdpBridge
from orchestrator.surfaces.browser.direct import DirectSessions
from orchestrator.surfaces.browser.reading import CONSOLE_KEPT
from orchestrator.surfaces.browser.secrets import PageSessions, page_secrets
from sandboxes import rig_params as r
from sandboxes.fence import fence
from sandboxes.masking import (
    MaskPlan,
    Probe,
    apply_mask,
    blank_png,
    checked_size,
    decode,
    paint,
    plan_mask,
    png_size,
)
from sandboxes.ports import AttachedContainer
from sandboxes.secret_fields import ProbeError
from sandboxes.urls import check_url

ACTION_MS = 10_000
ACTION_S = ACTION_MS / 1000
NAVIGATE_MS = 30_000
TABS_MAX = 20
# X keysym names (sandboxes.keys) -> Playwright key names.
_PW_KEYS = {
    "Return": "Enter",
    "BackSpace": "Backspace",
    "Prior": "PageUp",
    "Next": "PageDown",
    "Up": "ArrowUp",
    "Down": "ArrowDown",
    "Left": "ArrowLeft",
    "Right": "ArrowRight",
    "space": "Space",
}
COUNTED_VERBS = frozenset({"navigate", "click", "fill", "press", "select", "back", "clipboard_set"})


def playwright_key(key: str) -> str:
    """`ctrl+c` / `shift+Tab` / `Return` (a check_key verdict) as Playwright spells it."""
    parts = key.split("+")
    mods = {"ctrl": "Control", "shift": "Shift"}
    return "+".join([mods.get(p, p) for p in parts[:-1]] + [_PW_KEYS.get(parts[-1], parts[-1])])


@dataclass(kw_only=True)
class BrowserRig(Surface):
    """A headless browser: its driver is Playwright over the CDP channel."""

    kind: ClassVar[str] = "browser"

    container: AttachedContainer
    bridge: CdpBridge
    browser: Browser
    context: BrowserContext
    chromium_sandbox: bool = True
    current: int = 0
    console: deque[str] = field(default_factory=lambda: deque(maxlen=CONSOLE_KEPT))
    ignored: set[Page] = field(default_factory=set)  # Chromium's UI surfaces, not tabs
    last_snapshot: str = ""  # the last extract a11y (its refs' roles and names)
    sessions: PageSessions = field(init=False)  # one kept CDP session per page
    worlds: aria.Worlds = field(default_factory=aria.Worlds)  # our isolated worlds

    def __post_init__(self) -> None:
        self.sessions = PageSessions(DirectSessions(self.bridge, self.context))

    # ------------------------------------------------------------------ pages
    def watch(self, page: Page) -> None:
        def on_console(message: ConsoleMessage) -> None:
            self.console.append(f"[{message.type}] {message.text}"[:2000])

        page.on("console", on_console)

    @property
    def pages(self) -> list[Page]:
        pages = self.context.pages
        return [p for p in pages if not p.is_closed() and p not in self.ignored][:TABS_MAX]

    async def page(self) -> Page:
        pages = self.pages
        if not pages:
            page = await self.context.new_page()
            self.watch(page)
            pages = [page]
        self.current = min(self.current, len(pages) - 1)
        page = pages[self.current]
        if page.viewport_size is None:  # a page the rig opened itself (a popup): fix its size
            await page.set_viewport_size({"width": self.width, "height": self.height})
        return page

    @property
    def broken(self) -> str | None:
        return self.egress_gone or self.bridge.closed_reason

    def counts(self, verb: r.BrowserVerb) -> bool:
        """Whether `verb` spends one action of the budget (reads do not)."""
        if isinstance(verb, r.BrowserTabs):
            return verb.select is not None or verb.close is not None
        return verb.verb in COUNTED_VERBS

    # ------------------------------------------------------------------ verbs
    async def run(self, verb: r.BrowserVerb, status: str) -> Answer:
        """Do one verb (already validated and counted); the tool answer."""
        page = await self.page()
        try:
            return await self._run(page, verb, status)
        except RefGone as exc:
            raise RigError(
                f"{getattr(verb, 'verb', '?')}: ref {exc} is not on the page now (refs come "
                "from the last extract a11y; take a new snapshot)"
            ) from exc
        except PlaywrightError as exc:
            raise RigError(_playwright_message(verb, exc)) from exc

    async def _run(self, page: Page, verb: r.BrowserVerb, status: str) -> Answer:
        if isinstance(verb, r.BrowserNavigate):
            return await self._navigate(page, verb.url, status)
        if isinstance(verb, r.BrowserClick):
            await self._act_on(page, verb)
            return await self._page_answer(page, f"Clicked {_named(verb)}.", status)
        if isinstance(verb, r.BrowserFill):
            await self._act_on(page, verb)
            return answer(text_block(f"Filled {_named(verb)} ({len(verb.text)} chars). {status}"))
        if isinstance(verb, r.BrowserSelect):
            chosen = await self._act_on(page, verb)
            return answer(text_block(f"Selected {chosen} option(s) in {_named(verb)}. {status}"))
        if isinstance(verb, r.BrowserPress):
            key = playwright_key(verb.verdict.key)
            await page.keyboard.press(key)
            return answer(text_block(f"Pressed {verb.verdict.key}. {status}"))
        if isinstance(verb, r.BrowserBack):
            return await self._back(page, status)
        if isinstance(verb, r.BrowserExtract):
            return await reading.extract(self, page, verb.mode, status)
        if isinstance(verb, r.BrowserClipboardSet):
            await self._clipboard(page, "navigator.clipboard.writeText", verb.text)
            return answer(text_block(f"Clipboard set ({len(verb.text)} chars). {status}"))
        if isinstance(verb, r.BrowserClipboardGet):
            text = await self._clipboard(page, "navigator.clipboard.readText", None)
            return answer(text_block(f"Clipboard read. {status}\n" + fence(text, "the clipboard")))
        if isinstance(verb, r.BrowserTabs):
            return await self._tabs(verb, status)
        if isinstance(verb, r.BrowserScreenshot):
            return await self.screenshot(page, status)
        raise RigError(f"browser_use has no handler for verb {verb.verb}")

    async def _navigate(self, page: Page, url: str, status: str) -> Answer:
        """A navigation the pipeline's rules stage allowed (`RigDriver.rules`: the URL
        policy); `check_url` here names the host for the answer."""
        verdict = check_url(url, self.allowed_domains, self.pinned)
        try:
            await page.goto(url, wait_until="load", timeout=NAVIGATE_MS)
        except PlaywrightError as exc:
            await proxy_alive(self, f"Navigation to {verdict.host} failed")
            text = str(exc).splitlines()[0]
            net = text[text.find("net::") :].split()[0] if "net::" in text else "failed"
            return answer(
                text_block(f"Navigation to {verdict.host} failed: {net}. {status}"),
                is_error=True,
            )
        return await self._page_answer(page, f"Opened {verdict.host}.", status)

    async def _back(self, page: Page, status: str) -> Answer:
        # The rig's Chromium runs without the back/forward cache, so this is a plain
        # navigation with a load event of its own.
        session = await self.context.new_cdp_session(page)
        try:
            history = await session.send("Page.getNavigationHistory")
        finally:
            await session.detach()
        if history.get("currentIndex", 0) < 1:
            return answer(text_block(f"There is no earlier page in this tab. {status}"))
        await page.go_back(wait_until="load", timeout=NAVIGATE_MS)
        return await self._page_answer(page, "Went back.", status)

    async def _act_on(
        self, page: Page, verb: r.BrowserClick | r.BrowserFill | r.BrowserSelect
    ) -> int:
        """A click, fill or select on its element: by ref in corral's world (`aria`), by
        role + name with Playwright's locator and its actionability; how many options a
        select chose (0 for the others)."""
        ref = verb.ref
        if ref is not None:
            main, worlds = await self.sessions.of(page), self.worlds
            if isinstance(verb, r.BrowserClick):
                await aria.click(worlds, main, ref, double=verb.double, deadline_s=ACTION_S)
            elif isinstance(verb, r.BrowserFill):
                await aria.fill(worlds, main, ref, verb.text, deadline_s=ACTION_S)
            else:
                return await aria.select(worlds, main, ref, verb.option, deadline_s=ACTION_S)
            return 0
        target = self._target(page, verb)
        if isinstance(verb, r.BrowserClick):
            await (target.dblclick if verb.double else target.click)(timeout=ACTION_MS)
        elif isinstance(verb, r.BrowserFill):
            await target.fill(verb.text, timeout=ACTION_MS)
        else:
            return len(await target.select_option(label=verb.option, timeout=ACTION_MS))
        return 0

    def locate(self, page: Page, verb: Any) -> Any:
        """The locator of a verb's element (its ref, or role + exact name)."""
        return self._target(page, verb)

    def _target(self, page: Page, verb: Any) -> Any:
        if verb.ref is not None:
            return page.locator(f"aria-ref={verb.ref}")
        return page.get_by_role(verb.role, name=verb.name, exact=True)

    async def _page_answer(self, page: Page, done: str, status: str) -> Answer:
        title = await page.title()
        about = fence(f"url: {page.url}\ntitle: {title}", "the page")
        return answer(text_block(f"{done} {status}\n{about}"))

    async def _clipboard(self, page: Page, function: str, text: str | None) -> str:
        """Call the clipboard API in an isolated world: the page's own globals (which it
        may have replaced) are never used."""
        await page.bring_to_front()
        session = await self.context.new_cdp_session(page)
        try:
            tree = await session.send("Page.getFrameTree")
            world = await session.send(
                "Page.createIsolatedWorld",
                {"frameId": tree["frameTree"]["frame"]["id"], "worldName": "corral-clipboard"},
            )
            argument = "" if text is None else json.dumps(text)
            result = await session.send(
                "Runtime.evaluate",
                {
                    "expression": f"{function}({argument})",
                    "contextId": world["executionContextId"],
                    "awaitPromise": True,
                    "userGesture": True,
                    "returnByValue": True,
                },
            )
        finally:
            await session.detach()
        if "exceptionDetails" in result:
            detail = result["exceptionDetails"].get("exception", {}).get("description", "")
            raise RigError(f"the clipboard could not be used: {detail.splitlines()[0][:200]}")
        value = result.get("result", {}).get("value")
        return value if isinstance(value, str) else ""

    async def _tabs(self, verb: r.BrowserTabs, status: str) -> Answer:
        pages = self.pages
        if verb.select is not None or verb.close is not None:
            index = verb.select if verb.select is not None else verb.close
            assert index is not None
            if index >= len(pages):
                raise SessionRefused(f"tabs: there is no tab {index} (tabs 0-{len(pages) - 1})")
            if verb.close is not None:
                await pages[index].close()
                self.current = 0 if index == self.current else self.current - (index < self.current)
            else:
                self.current = index
                await pages[index].bring_to_front()
            pages = self.pages
        lines = [
            f"{i}{' (current)' if i == self.current else ''}: {p.url} | {await p.title()}"
            for i, p in enumerate(pages)
        ]
        return answer(
            text_block(f"{len(pages)} tab(s). {status}\n" + fence("\n".join(lines), "the tabs")),
            tabs=len(pages),
            current=self.current,
        )

    # ------------------------------------------------------------------ screenshot
    async def screenshot(self, page: Page, status: str) -> Answer:
        """The masked screenshot: never an unmasked image because a check failed."""
        masked, plan = await self.masked(page)
        return image_answer(
            masked, plan, status, used=self.clock.used, max_actions=self.clock.max_actions
        )

    async def frame(self) -> Frame:
        masked, plan = await self.masked(await self.page())
        return Frame(masked, plan.reason if plan.full else None)

    async def _capture(self, page: Page) -> bytes:
        """The viewport as Chromium paints it, a PNG encoded for speed (`optimizeForSpeed`:
        half the time of Playwright's `page.screenshot`, which also waits on fonts and
        hides the caret first), on the page's kept session."""
        session = await self.sessions.of(page)
        try:
            with anyio.fail_after(ACTION_MS / 1000):
                shot = await session.send(
                    "Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}
                )
        except BaseException:
            await self.sessions.drop(page)
            raise
        return base64.b64decode(shot["data"], validate=True)

    async def masked(self, page: Page) -> tuple[bytes, MaskPlan]:
        """The page's screenshot with every secret field seen before or after it masked,
        and what was masked; black, saying why, when a check failed. The image is decoded
        (off the event loop) while the second probe runs when the first found a field."""
        size = (self.width, self.height)
        async with capture_slot():  # one of the host's (orchestrator.backends.admission)
            return await self._masked(page, size)

    async def _masked(self, page: Page, size: tuple[int, int]) -> tuple[bytes, MaskPlan]:
        try:
            before = (await page_secrets(self.sessions, page, values=False)).rects
            png = await self._capture(page)
            size = checked_size(png_size(png) or size)  # the browser's claim, bounded

            async def probe_after() -> set[tuple[int, int, int, int]]:
                return (await page_secrets(self.sessions, page, values=False)).rects

            async def decoded() -> Image | None:
                return await anyio.to_thread.run_sync(decode, png) if before else None

            after, image = await both(probe_after, decoded)
            frames = tuple(f.url for f in page.frames[1:])
            probe = Probe(1, True, tuple(before | after), page.url, "", frame_urls=frames)
            plan = plan_mask(probe, self.deny_list, size)
            masked = await anyio.to_thread.run_sync(_masked, png, image, plan, size)
        except (PlaywrightError, RigError, ProbeError, ValueError, KeyError, TimeoutError) as exc:
            why = f"the screenshot could not be checked ({str(exc).splitlines()[0][:200]})"
            plan = plan_mask(Probe(0, False, (), "", "", error=why), self.deny_list, size)
            masked = blank_png(*size)
        return masked, plan


def _masked(png: bytes, image: Image | None, plan: MaskPlan, size: tuple[int, int]) -> bytes:
    """The PNG to send: black when the plan masks all, else painted (from the image
    already decoded, if any)."""
    if plan.full:
        return blank_png(*size)
    return apply_mask(png, plan, size) if image is None or not plan.rects else paint(image, plan)


def _named(verb: Any) -> str:
    return f"ref {verb.ref}" if verb.ref is not None else f"{verb.role} {verb.name!r}"


def _playwright_message(verb: Any, exc: PlaywrightError) -> str:
    """Playwright's error, cut to its first line and said in the verb's terms."""
    first = (exc.message or str(exc)).splitlines()[0][:300]
    name = getattr(verb, "verb", "?")
    if "strict mode violation" in first:
        return (
            f"{name}: {_named(verb)} matches several elements; use a ref from extract a11y "
            "(verb extract, mode a11y)"
        )
    if "Timeout" in first and getattr(verb, "ref", None) is not None:
        return (
            f"{name}: ref {verb.ref} is not on the page now (refs come from the last extract "
            "a11y; take a new snapshot)"
        )
    if "Timeout" in first and getattr(verb, "role", None) is not None:
        return f"{name}: no element with role {verb.role} and name {verb.name!r} was found"
    return f"{name} failed: " + fence(first, "Playwright's error (it may quote the page)")


__all__ = ["COUNTED_VERBS", "BrowserRig", "MaskPlan", "playwright_key"]
