"""codrive on an agent's desktop rig: the `Desktop` port of `orchestrator.codrive.runs`
and the ladder's probes (`sandboxes.ladder.DesktopProbes`), over the rig's agent channel
(the ops in `rig_images/desktop/codrive_ops.py`), and the api_action registry.

The seat: a step runs inside the one action pipeline (`orchestrator.codrive.step`), which
holds the desktop's lock for it; every input (pointer, keyboard, an AT-SPI action, a
clipboard write) checks right before it is written that the AI holds the desktop, and
counts itself as delivered once written. Typing goes in short chunks, each checked, so a
person's input (which takes the seat in the console's bridge, before it is forwarded)
freezes the AI within one chunk. A `wait` step is interrupted by a change of seat.

Secrets: text is never typed or pasted into a secret field (a password text, or in
Chromium a password, autocomplete-secret or CSS-masked input): the focused element is read
right before, and such a step is handed to a person (`SecretField`).

The registry (docs/codrive.md, "Adding an api_action"): per application, a name, a
pydantic schema for `params`, and a probe that acts and returns True (the application
confirmed it), False, or the text it read.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import RigError, SeatError, SecretField
from orchestrator.surfaces.acts_on import read_focused, read_target
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.screenshots import masked_screenshot
from sandboxes.codrive import Step
from sandboxes.codrive_rules import StepTarget, points_at_element, types_text
from sandboxes.keys import check_key
from sandboxes.ladder import ApiAction, DesktopProbes, Located, Registry
from sandboxes.params import TYPE_MAX_CHARS
from sandboxes.urls import URL_MAX_BYTES, check_url

PERSON_HAS_IT = "a person has the desktop"
OP_S = 10.0
TYPE_CHUNK = 16  # characters per typing request: the seat is checked between chunks
SETTLE_MS = 400  # how long a step's effect may take to show before "no visible effect"
IDLE_QUIET_MS, IDLE_MAX_MS = 300, 5000  # watch_mode (SPEC S3.6; issue 11 item 7)
GTK_APPS = ("mousepad", "galculator", "gnome-calculator")


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Widget(_Params):
    """A named widget in the app's accessibility tree (role optional: any role)."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    role: Annotated[str, Field(min_length=1, max_length=64)] | None = None


class Read(_Params):
    role: Annotated[str, Field(min_length=1, max_length=64)]
    name: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class Url(_Params):
    url: Annotated[str, Field(min_length=1, max_length=URL_MAX_BYTES)]


class Nothing(_Params):
    pass


class ClipboardText(_Params):
    text: Annotated[str, Field(min_length=1, max_length=TYPE_MAX_CHARS)]


class RigDesktop:
    """One run's view of the agent's desktop rig (implements Desktop and DesktopProbes)."""

    def __init__(self, rig: DesktopRig, app: str) -> None:
        self.rig = rig
        self.app = app
        self.probes: DesktopProbes = self
        self.seat_id = rig.id
        self.registry: Registry = registry_for(self)
        self._asked_at: int | None = None
        self.delivered = 0  # inputs written in the current try (0: none reached the desktop)

    @property
    def surface(self) -> DesktopRig:
        return self.rig

    async def _op(self, op: str, deadline: float = OP_S, **fields: Any) -> dict[str, Any]:
        return await self.rig.channel.request(op, deadline, **fields)

    async def _input(self, op: str, deadline: float = OP_S, **fields: Any) -> dict[str, Any]:
        """An input op, only while the AI holds the seat: asked right before it is written,
        under the rig's lock, which the action pipeline holds for the whole step, so a take
        over waits this op out and none follows it (orchestrator.surfaces.pipeline)."""
        if not self.rig.lock.locked():
            raise AssertionError("a codrive input outside the action pipeline")
        if not self.rig.ai_holds():
            raise SeatError(PERSON_HAS_IT)
        self.delivered += 1
        return await self._op(op, deadline, **fields)

    # ------------------------------------------------------------------ what a step acts on
    async def target(self, step: Step) -> StepTarget:
        """What `step` would act on, read from the desktop now (for its rules)."""
        url = str((step.params or {}).get("url") or "") or None
        if step.api_action in ("press", "activate"):
            params = step.params or {}
            found = await self.locate(
                self.app, str(params.get("role") or ""), str(params.get("name") or "")
            )
            return _located(found, url)
        if points_at_element(step):
            if step.role is not None and step.name is not None:
                found = await self.locate(self.app, step.role, step.name)
                if found.center is not None or step.x is None or step.y is None:
                    return _located(found, url)
            if step.x is not None and step.y is not None:
                return await self.element_at(step.x, step.y, url)
        if step.action in ("key", "type"):
            return StepTarget(focused=await self.focused(), url=url)
        return StepTarget(url=url, unread="the step names no element")

    async def element_at(self, x: int, y: int, url: str | None = None) -> StepTarget:
        """The element a click at (x, y) meets, as the desktop's `computer_use` reads it
        for its rules (the agent's `target` op: the topmost window there)."""
        return StepTarget(await read_target(self.rig.channel, x, y), url=url)

    async def focused(self) -> dict[str, Any]:
        """The focused element (and a text field's submit control), as the desktop's
        `computer_use` reads it for its rules (the agent's `focus_target` op)."""
        return await read_focused(self.rig.channel, "focus_target")

    async def _refuse_secret(self, step: Step) -> None:
        """Hand a step that would type or paste into a secret field to a person."""
        if not types_text(step):
            return
        found = await self._op("focused", app=self.app)
        if found.get("secret") is not False:
            what = "a secret field" if found.get("secret") else "a field that cannot be read"
            raise SecretField(f"the focused element is {what}: a person must type this")

    # ------------------------------------------------------------------ probes
    async def locate(self, app: str, role: str, name: str) -> Located:
        found = await self._op("locate", app=app, role=role, name=name)
        center = found.get("center")
        return Located(
            (int(center[0]), int(center[1])) if center else None,
            str(found["how"]),
            found.get("role"),
            found.get("name"),
        )

    async def pointer(self, step: Step, x: int, y: int) -> None:
        if step.action == "scroll":
            await self._input("scroll", x=x, y=y, direction=step.direction, amount=step.amount or 3)
        else:
            await self._input(
                "click", x=x, y=y, button="left", double=step.action == "double_click"
            )

    async def keyboard(self, step: Step) -> None:
        await self._refuse_secret(step)
        if step.action == "type":
            text = step.text or ""
            for start in range(0, len(text), TYPE_CHUNK):
                await self._input("type", OP_S * 3, text=text[start : start + TYPE_CHUNK])
            return
        pressed = check_key(step.key_name or "")
        if not pressed.allowed:
            raise RigError(pressed.message)
        await self._input("key", key=pressed.key)

    async def fingerprint(self, app: str) -> str:
        return str((await self._op("fingerprint", app=app))["fp"])

    async def settle(self, app: str, before: str) -> bool:
        return bool(
            (await self._op("settle", app=app, before=before, within_ms=SETTLE_MS))["changed"]
        )

    async def pause(self, seconds: int) -> None:
        """A wait step; a change of seat interrupts it (the step is dropped, then retried)."""
        changed = self.rig.seat_changed
        with anyio.move_on_after(seconds):
            await changed.wait()
            raise SeatError(PERSON_HAS_IT)

    # ------------------------------------------------------------------ the Desktop port
    async def masked_png(self) -> bytes:
        return (await masked_screenshot(self.rig, "")).png

    async def where(self, app: str) -> tuple[str, str]:
        found = await self._op("where", app=app)
        return str(found.get("title") or ""), str(found.get("url") or "")

    def seat_is_human(self) -> bool:
        return self.rig.controller == "human"

    def seat_changes(self) -> int:
        return self.rig.seat_count

    async def ask_person(self, why: str) -> None:
        self.rig.needs_person = why
        self._asked_at = self.rig.seat_count

    async def wait_handback(self, within: float) -> bool:
        """After ask_person: a person took the seat and handed it back. Otherwise: the
        person who has the seat handed it back."""
        asked = self._asked_at
        try:
            with anyio.move_on_after(within):
                while self.rig.controller == "human" or (
                    asked is not None and self.rig.seat_count <= asked
                ):
                    await self.rig.seat_changed.wait()
                return True
            return False
        finally:
            self._asked_at = None
            self.rig.needs_person = None

    async def wait_idle(self, app: str) -> str:
        found = await self._op("idle", OP_S, app=app, quiet_ms=IDLE_QUIET_MS, max_ms=IDLE_MAX_MS)
        if found.get("idle"):
            return f"idle after {found.get('ms')} ms"
        return f"still changing after {IDLE_MAX_MS} ms"


def _located(found: Located, url: str | None) -> StepTarget:
    if found.center is None or found.role is None:
        return StepTarget(url=url, unread=f"the element was not found ({found.how})")
    element = {"name": found.name or "", "role": found.role, "text": None, "href": None}
    return StepTarget({**element, "error": None}, url=url)


def registry_for(desk: RigDesktop) -> Registry:
    """The api actions of every app on the desktop rig, bound to this desktop."""

    async def press(p: Any) -> bool:
        done = await desk._input("widget", app=desk.app, name=p.name, role=p.role, action="press")
        return bool(done.get("done"))

    async def activate(p: Any) -> bool:
        done = await desk._input(
            "widget", app=desk.app, name=p.name, role=p.role, action="activate"
        )
        return bool(done.get("done"))

    async def read(p: Any) -> str:
        return str((await desk._op("read", app=desk.app, role=p.role, name=p.name))["text"])

    async def clipboard_set(p: Any) -> bool:
        await desk._input("clipboard_set", text=p.text)
        return True

    async def clipboard_get(_: Any) -> str:
        return str((await desk._op("clipboard_get")).get("text", ""))

    async def open_url(p: Any) -> bool:
        verdict = check_url(p.url, desk.rig.allowed_domains, desk.rig.pinned)
        if not verdict.allowed:
            raise RigError(verdict.message)
        await desk._input("browser", what="open_url", url=p.url)
        return True

    async def reload(_: Any) -> bool:
        await desk._input("browser", what="reload")
        return True

    async def back(_: Any) -> bool:
        await desk._input("browser", what="back")
        return True

    common = {
        "clipboard_set": ApiAction(ClipboardText, clipboard_set, "put text on the clipboard"),
        "clipboard_get": ApiAction(Nothing, clipboard_get, "read the clipboard"),
    }
    gtk = {
        "press": ApiAction(Widget, press, "AT-SPI action press/click on a named widget"),
        "activate": ApiAction(Widget, activate, "AT-SPI action activate on a named widget"),
        "read": ApiAction(Read, read, "the text of a widget, from the accessibility tree"),
        **common,
    }
    browser = {
        "open_url": ApiAction(Url, open_url, "open a URL of the allowlist in the tab (CDP)"),
        "reload": ApiAction(Nothing, reload, "reload the tab (CDP)"),
        "back": ApiAction(Nothing, back, "go back in the tab's history (CDP)"),
        "press": gtk["press"],
        "read": gtk["read"],
        **common,
    }
    return {**{app: gtk for app in GTK_APPS}, "chromium": browser}
