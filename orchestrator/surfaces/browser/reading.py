"""What an agent reads of a browser rig's page: `extract` (corral's own accessibility
snapshot, the page's text, the console), every secret value withheld; and a ref's element
as the approval rules read it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from playwright.async_api import Page

from orchestrator.errors import RefGone, RigError
from orchestrator.surfaces.answers import Answer, answer, text_block
from orchestrator.surfaces.browser import acts_on, aria
from orchestrator.surfaces.browser.secrets import page_secrets
from sandboxes.fence import fence
from sandboxes.secret_fields import ProbeError
from sandboxes.withhold import WITHHELD, withhold

if TYPE_CHECKING:
    from orchestrator.surfaces.browser.rig import BrowserRig

READ_S = 10.0  # how long a snapshot or the page's text may take
TEXT_MAX_CHARS = 100_000  # an extract longer than this is cut, and the answer says so
CONSOLE_KEPT = 200  # console messages kept per rig (the newest)


async def extract(rig: BrowserRig, page: Page, mode: str, status: str) -> Answer:
    """`extract` in `mode` (a11y, text, console): the text, fenced as the page's; every
    secret value read just before or just after it withheld (one changed meanwhile is
    caught)."""
    seen = await _secret_values(rig, page) if mode != "console" else []
    if mode == "a11y":
        text = await snapshot(rig, page)
        note = "Elements carry [ref=ID]: pass ref to click, fill or select."
    elif mode == "text":
        text = await page.locator("body").inner_text(timeout=READ_S * 1000)
        note = "The page's visible text."
    else:
        text = "\n".join(rig.console)
        note = f"The last {len(rig.console)} console message(s) (at most {CONSOLE_KEPT})."
    if mode != "console":
        text, count = withhold(text, seen + await _secret_values(rig, page))
        note += f" {count} secret value(s) withheld, shown as {WITHHELD}." if count else ""
    if mode == "a11y":
        rig.last_snapshot = text  # what its refs were, for the approval rules
    cut = len(text) > TEXT_MAX_CHARS
    if cut:
        text = text[:TEXT_MAX_CHARS]
        note += f" Cut at {TEXT_MAX_CHARS} characters."
    fenced = fence(text, f"the page {page.url!r} ({mode})")
    return answer(text_block(f"{note} {status}\n{fenced}"), mode=mode, truncated=cut)


async def snapshot(rig: BrowserRig, page: Page) -> str:
    """corral's own snapshot of `page` (`browser/aria.py`) on the page's kept sessions;
    a frame of another renderer the probe has no session for yet is said unread."""
    main = await rig.sessions.of(page)
    others = [kept.session for kept in rig.sessions.frames.get(page, {}).values()]
    try:
        with anyio.fail_after(READ_S):
            return await aria.snapshot(rig.worlds, main, others)
    except TimeoutError:
        await rig.sessions.drop(page)
        raise RigError(f"extract: the page did not answer within {READ_S:.0f} s") from None
    except RigError:
        await rig.sessions.drop(page)
        raise


async def read_ref(rig: BrowserRig, page: Page, ref: str, role: str, name: str) -> dict[str, Any]:
    """`ref`'s element as the approval rules judge it (`acts_on.judged`): its role and
    name as the last snapshot gave them, the rest read now; an `error` when it cannot be."""
    try:
        read = await aria.read(rig.worlds, await rig.sessions.of(page), ref)
    except RefGone:
        return acts_on.unread(f"ref {ref} is not on the page now")
    except RigError as exc:
        return acts_on.unread(f"the element could not be read ({str(exc).splitlines()[0]})")
    return acts_on.judged(read, role, name)


async def _secret_values(rig: BrowserRig, page: Page) -> list[str]:
    """The live values of the page's secret fields; no text at all when they cannot
    be told."""
    try:
        return (await page_secrets(rig.sessions, page, values=True, rects=False)).values
    except ProbeError as exc:
        raise RigError(f"extract: the page's secret fields could not be checked ({exc})") from exc
