"""What the two mobile rigs (android_rig, ios_rig) share: the rig's bookkeeping fields the
rig manager reads (clock, controller, state), the device lease, and the masked
screenshot answer.

A phone rig has no container and no egress of its own: it is a lease on a configured
device (`[rigs.android]` / `[rigs.ios]`), held by one agent at a time and released when
the rig ends (rig_close, idle timeout, lifetime, the agent losing the tool, the
gateway stopping, or the device failing).

Screenshots are masked like every other rig's (`sandboxes.masking`): the UI tree is read
before and after the capture and every secret field found in either (Android
`password="true"`, iOS `XCUIElementTypeSecureTextField`) is blacked out; when the tree
cannot be read, the whole image is masked. An unmasked image never leaves because a
check failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio

from orchestrator.errors import DeviceError
from orchestrator.recordings.recorder import Frame
from orchestrator.surfaces.answers import Answer, answer, image_answer, text_block
from orchestrator.surfaces.base import Surface
from sandboxes.fence import fence
from sandboxes.masking import (
    MaskPlan,
    Probe,
    Rect,
    apply_mask,
    blank_png,
    checked_size,
    plan_mask,
    png_size,
)
from sandboxes.mobile_params import MOBILE_COUNTED, AndroidTap, AndroidVerb, IosTap, IosVerb
from sandboxes.mobile_ui import UiTree, UiTreeError

PNG_MAX_BYTES = 32 * 1024 * 1024


@dataclass(kw_only=True)
class MobileRig(Surface):
    """A leased phone: no container, no egress of ours (phones keep their own network)."""

    kind: ClassVar[str] = "mobile"

    device: str  # the leased device: an adb serial or the WDA URL
    broken: str | None = None  # set when the device is lost
    tree: UiTree | None = None  # the last inspect: what refs point at

    def counts(self, verb: AndroidVerb | IosVerb) -> bool:
        return verb.verb in MOBILE_COUNTED

    @contextlib.contextmanager
    def watched(self) -> Iterator[None]:
        """Around a verb: a DeviceError that says the device is gone ends the rig (the
        manager sees `broken`), and goes on up."""
        try:
            yield
        except DeviceError as exc:
            if exc.lost:
                self.broken = str(exc)
            raise

    async def dump(self) -> UiTree:
        """The device's UI tree now (each phone reads its own)."""
        raise NotImplementedError

    def point(self, verb: AndroidTap | IosTap) -> tuple[int, int, str]:
        """x, y of a tap: given, or the centre of a ref from the last inspect."""
        if verb.ref is None:
            assert verb.x is not None and verb.y is not None  # _Point checked: x,y or ref
            return verb.x, verb.y, f"{verb.x},{verb.y}"
        element = self.tree.by_ref(verb.ref) if self.tree is not None else None
        if element is None:
            raise DeviceError(
                f"ref: {verb.ref} is not in the last inspect of this rig; run inspect again"
            )
        x, y = element.center
        return x, y, f"{verb.ref} ({element.role}) at {x},{y}"

    async def inspect(self, source: str, status: str) -> Answer:
        """The UI tree as the AI reads it. The device's dump is untrusted: one that cannot
        be read (not XML, a DTD, too large, a secret field's box unreadable) is a clear
        error for this call, the rig kept (the next call reads the device again)."""
        try:
            tree = await self.dump()
        except UiTreeError as exc:
            raise DeviceError(f"{source} could not be read: {str(exc)[:300]}") from None
        self.tree = tree
        text = fence(tree.render(), source)
        secrets = sum(1 for e in tree.elements if e.secret)
        return answer(
            text_block(f"{len(tree.elements)} element(s). {status}\n{text}"),
            elements=len(tree.elements),
            secret_fields=secrets,
        )

    async def masked_screenshot(
        self,
        capture: Callable[[], Awaitable[bytes]],
        secrets: Callable[[], Awaitable[tuple[Rect, ...]]],
        status: str,
    ) -> Answer:
        """One image: the capture with every secret field seen before or after it masked."""
        masked, plan = await self.masked(capture, secrets)
        return image_answer(
            masked, plan, status, used=self.clock.used, max_actions=self.clock.max_actions
        )

    async def frame(self) -> Frame:
        masked, plan = await self.masked(self._capture, self._secrets)
        return Frame(masked, plan.reason if plan.full else None)

    async def _capture(self) -> bytes:
        """The device's screen as a PNG (each phone captures its own)."""
        raise NotImplementedError

    async def _secrets(self) -> tuple[Rect, ...]:
        """The secret fields on the device's screen now (each phone reads its own)."""
        raise NotImplementedError

    async def masked(
        self,
        capture: Callable[[], Awaitable[bytes]],
        secrets: Callable[[], Awaitable[tuple[Rect, ...]]],
    ) -> tuple[bytes, MaskPlan]:
        """The capture with every secret field seen before or after it masked, and what
        was masked; black, saying why, when the fields could not be found."""
        size = (self.width or 1, self.height or 1)
        try:
            before = await secrets()
            png = await capture()
            if len(png) > PNG_MAX_BYTES:
                raise UiTreeError(f"the device's screenshot is over {PNG_MAX_BYTES >> 20} MiB")
            try:
                shown = checked_size(png_size(png))
            except ValueError as exc:
                raise UiTreeError(f"the device's screenshot cannot be used: {exc}") from None
            after = await secrets()
            size = shown
            probe = Probe(1, True, tuple(sorted(set(before) | set(after))), "", "")
            plan = plan_mask(probe, (), size)
            masked = await anyio.to_thread.run_sync(apply_mask, png, plan, size)
        except (UiTreeError, ValueError, OSError) as exc:
            plan = _whole(f"the secret fields could not be found ({str(exc)[:200]})")
            masked = blank_png(*size)
        except DeviceError as exc:
            if exc.lost:
                self.broken = str(exc)
                raise
            plan = _whole(f"the screen could not be checked ({str(exc)[:200]})")
            masked = blank_png(*size)
        return masked, plan


def _whole(reason: str) -> MaskPlan:
    return MaskPlan(
        True, reason=reason, next_step="Take the screenshot again; if this repeats, rig_close."
    )


def done(text: str, status: str, **structured: Any) -> Answer:
    return answer(text_block(f"{text} {status}"), **structured)


def device_output(text: str, source: str, status: str, what: str) -> Answer:
    """A command's output: the device wrote it, so it is fenced."""
    return answer(text_block(f"{what} {status}\n{fence(text[:100_000], source)}"))
