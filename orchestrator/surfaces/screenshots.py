"""A kiosk session's masked screenshot (SPEC S2.4).

Whatever fails on the way (the kiosk, its answer, the probe, decoding or masking), the
result is an all-black PNG that says why: never an error without an image, never an
unmasked one. The masked PNG is also what approvals and the console's timeline show.
"""

from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import dataclass
from typing import Any

import anyio

from orchestrator.backends.admission import capture_slot
from orchestrator.errors import KioskError
from orchestrator.recordings.recorder import Frame
from orchestrator.surfaces.answers import Answer, image_answer
from orchestrator.surfaces.base import ChannelSurface
from sandboxes.masking import MaskPlan, Probe, apply_mask, blank_png, plan_mask, png_size

logger = logging.getLogger("corral.sessions")


class NotTheScreen(Exception):
    """The kiosk's image is not a PNG of the session's screen (its size is the gateway's to
    know: a kiosk that said another could have the gateway allocate for any size)."""


@dataclass(frozen=True, slots=True)
class Shot:
    png: bytes  # the masked PNG
    plan: MaskPlan  # what was masked, and why
    failed: bool  # the kiosk did not answer (its channel may be broken)
    status: str  # the budget line the answer ends with
    used: int
    max_actions: int

    @property
    def answer(self) -> Answer:
        """The tool answer: the image block and its text."""
        return self.noted("")

    def noted(self, note: str) -> Answer:
        """The tool answer with `note` after the status (the session ended ...)."""
        status = self.status + note
        return image_answer(
            self.png, self.plan, status, used=self.used, max_actions=self.max_actions
        )


async def masked_screenshot(session: ChannelSurface, status: str) -> Shot:
    """The masked screenshot, its capture and masking in one of the host's capture slots
    (`orchestrator.backends.admission`: the deadline counts the kiosk's work, not the
    queue of other sessions' screenshots)."""
    async with capture_slot():
        return await _taken(session, status, await _asked(session, {}))


async def channel_frame(session: ChannelSurface) -> Frame:
    """A kiosk's or desktop rig's masked screen, for its recording. The agent is asked what
    the screen's pixels are too, and to answer `same` (no probes, no PNG) while they are
    still those of the last frame taken here: that frame, masked under the same deny list,
    is the screen again; the same pixels reveal nothing it did not (issue 23: a frame after
    an input that changed nothing cost the kiosk a whole screenshot). A frame masked whole
    is never reused: the next one checks the screen again."""
    last = session.last_frame
    if last is not None and last[1] != session.deny_list:
        last = None
    ask: dict[str, Any] = {"digest": True} if last is None else {"digest": True, "unless": last[0]}
    async with capture_slot():
        answer = await _asked(session, ask)
        digest = answer.get("digest") if isinstance(answer, dict) else None
        if last is not None and answer_is_same(answer, last[0]):
            return last[2]
        shot = await _taken(session, "", answer)
    frame = Frame(shot.png, shot.plan.reason or "masked whole" if shot.plan.full else None)
    session.last_frame = None
    if isinstance(digest, str) and not shot.plan.full:
        session.last_frame = (digest, session.deny_list, frame)
    return frame


def answer_is_same(answer: dict[str, Any] | KioskError, digest: str) -> bool:
    """The agent's answer says the screen's pixels are still `digest`'s."""
    return (
        isinstance(answer, dict) and answer.get("same") is True and answer.get("digest") == digest
    )


async def _asked(session: ChannelSurface, ask: dict[str, Any]) -> dict[str, Any] | KioskError:
    try:
        answer: dict[str, Any] = await session.channel.request(
            "screenshot", session.screenshot_deadline, **ask
        )
    except KioskError as exc:
        return exc
    return answer


async def _taken(session: ChannelSurface, status: str, shot: dict[str, Any] | KioskError) -> Shot:
    if isinstance(shot, KioskError):
        return _black(session, f"the screenshot failed ({shot})", status, failed=True)
    try:
        png, plan = await _masked(session, shot)
    except NotTheScreen as exc:
        return _black(session, str(exc), status, failed=False)
    except Exception:
        incident = uuid.uuid4().hex[:8]
        logger.exception("screenshot of session %s failed (incident %s)", session.id, incident)
        why = f"the screenshot could not be checked (incident {incident})"
        return _black(session, why, status, failed=False)
    return _shot(session, png, plan, status, failed=False)


def _black(session: ChannelSurface, why: str, status: str, *, failed: bool) -> Shot:
    plan = plan_mask(
        Probe(0, False, (), "", "", error=why),
        session.deny_list,
        (session.width, session.height),
    )
    png = blank_png(session.width, session.height)
    return _shot(session, png, plan, status, failed=failed)


def _probe(raw: dict[str, Any]) -> Probe:
    return Probe(
        windows=int(raw.get("windows", 0)),
        focused_ok=bool(raw.get("focused_ok", False)),
        password_rects=tuple(
            (int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in raw.get("password_rects") or ()
        ),
        url=str(raw.get("url") or ""),
        title=str(raw.get("title") or ""),
        error=raw.get("error"),
        pages=int(raw.get("pages", 1)),
        frame_urls=tuple(str(u) for u in raw.get("frame_urls") or ()),
        zoom=float(raw.get("zoom", 1.0)),
    )


async def _masked(session: ChannelSurface, shot: dict[str, Any]) -> tuple[bytes, MaskPlan]:
    png = base64.b64decode(shot["png"], validate=True)
    size = (session.width, session.height)
    if (got := png_size(png)) != size:
        what = "is not a PNG" if got is None else f"is {got[0]}x{got[1]} pixels"
        raise NotTheScreen(f"the screenshot {what}, not the screen's {size[0]}x{size[1]}")
    raw_probe = shot.get("probe")
    probe = _probe(raw_probe) if isinstance(raw_probe, dict) else None
    plan = plan_mask(probe, session.deny_list, size)
    painted = {tuple(int(v) for v in r) for r in shot.get("painted") or ()}
    if plan.full:
        masked = blank_png(*size)
    elif plan.rects and not set(plan.rects) <= painted:
        masked = await anyio.to_thread.run_sync(apply_mask, png, plan, size)
    else:
        # Nothing to mask, or the kiosk already painted every rectangle of this plan
        # black before encoding: a header check only (no decode, no re-encode).
        masked = apply_mask(png, MaskPlan(False), size)
    return masked, plan


def _shot(
    session: ChannelSurface, png: bytes, plan: MaskPlan, status: str, *, failed: bool
) -> Shot:
    return Shot(png, plan, failed, status, session.clock.used, session.clock.max_actions)
