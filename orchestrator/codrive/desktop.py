"""codrive on an agent's desktop rig: the `Desktop` port of `orchestrator.codrive.runs`
and the ladder's probes (`sandboxes.ladder.DesktopProbes`), over the rig's agent channel
(the ops in `rig_images/desktop/codrive_ops.py`), and the api_action registry.

The seat: every input (pointer, keyboard, an AT-SPI action, a clipboard write) first
checks that the AI holds the desktop; typing goes in short chunks, each checked, so a
person's input (which takes the seat in the console's bridge, before it is forwarded)
freezes the AI within one chunk. A `wait` step is interrupted by a change of seat.

The registry (docs/codrive.md, "Adding an api_action"): per application, a name, a
pydantic schema for `params`, and a probe that acts and returns True (the application
confirmed it), False, or the text it read.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import RigError, SeatError
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.screenshots import masked_screenshot
from sandboxes.codrive import Step
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

    async def _op(self, op: str, deadline: float = OP_S, **fields: Any) -> dict[str, Any]:
        return await self.rig.channel.request(op, deadline, **fields)

    async def _input(self, op: str, deadline: float = OP_S, **fields: Any) -> dict[str, Any]:
        """An input op, only while the AI holds the seat: checked under the rig's lock, as
        the action pipeline's inputs are, so a take over waits this op out and none
        follows it (orchestrator.surfaces.pipeline)."""
        async with self.rig.lock:
            if not self.rig.ai_holds():
                raise SeatError(PERSON_HAS_IT)
            return await self._op(op, deadline, **fields)

    # ------------------------------------------------------------------ probes
    async def locate(self, app: str, role: str, name: str) -> Located:
        found = await self._op("locate", app=app, role=role, name=name)
        center = found.get("center")
        return Located((int(center[0]), int(center[1])) if center else None, str(found["how"]))

    async def pointer(self, step: Step, x: int, y: int) -> None:
        if step.action == "scroll":
            await self._input("scroll", x=x, y=y, direction=step.direction, amount=step.amount or 3)
        else:
            await self._input(
                "click", x=x, y=y, button="left", double=step.action == "double_click"
            )

    async def keyboard(self, step: Step) -> None:
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
