"""The browser rig's secret-field probe against real Chromium in a real rig (no network:
these rigs get none): probes at once on its kept CDP session, and a kept walk of the page
(browser/kept.py) answering, after every kind of change a page can make, what a walk
taken afresh answers."""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from orchestrator.errors import CdpCallFailed
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime
from orchestrator.surfaces.browser.direct import GONE, DirectSessions
from orchestrator.surfaces.browser.secrets import PageSessions, page_secrets
from orchestrator.surfaces.rigs import RigManager
from tests.helpers import wait_until
from tests.integration.test_browser_rig import browser_rigs, call

pytestmark = [pytest.mark.anyio]


@pytest.fixture
async def rigs(corral_home: CorralHome, runtime: Runtime) -> AsyncIterator[RigManager]:
    async with browser_rigs(corral_home, runtime) as manager:
        yield manager


def _secret_page(value: str) -> str:
    page = (
        "<!doctype html><body style='margin:0'>"
        f"<input type=password value='{value}' style='position:absolute;left:10px;top:10px'>"
        f"<input value='{value}-css' style='position:absolute;left:10px;top:60px;"
        "-webkit-text-security:disc'><input value='plain' style='position:absolute;"
        "left:10px;top:110px'></body>"
    )
    return "data:text/html," + urllib.parse.quote(page)


async def test_probes_at_once_on_the_kept_session_each_see_every_secret_field(
    rigs: RigManager,
) -> None:
    """The rig keeps one CDP session per page for its secret-field probes: probes that
    overlap (the recorder's frame while the agent's extract runs) take turns on it, and
    it keeps working after the page moves to another document (another renderer)."""
    from orchestrator.surfaces.browser.secrets import page_secrets

    assert not (await call(rigs, "tabs")).is_error
    rig = rigs.rigs[("ann", "browser", "")]
    for value in ("first-4417", "second-9902"):
        page = await rig.page()
        await page.goto(_secret_page(value))
        found: list[tuple[int, list[str]]] = []

        async def probe(page: Any = page, found: list[Any] = found) -> None:
            got = await page_secrets(rig.sessions, page, values=True)
            found.append((len(got.rects), sorted(got.values)))

        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(probe)
        assert found == [(2, sorted([value, f"{value}-css"]))] * 6


# A page with one field of each kind the probe tells, and the plain ones a change turns
# secret. Every change below is made by the page's own script between two probes.
KEPT_PAGE = """<!doctype html><style id=sheet></style>
<style>input:not(:placeholder-shown).when-typed { -webkit-text-security: disc }</style>
<body style='margin:0'>
<input id=pw type=password value='pw-1170' style='position:absolute;left:10px;top:10px'>
<input id=plain value='plain-2281' style='position:absolute;left:10px;top:50px'>
<input id=later value='later-3392' class=later style='position:absolute;left:10px;top:90px'>
<input id=typed class=when-typed placeholder=x style='position:absolute;left:10px;top:130px'>
<div id=host style='position:absolute;left:300px;top:10px'></div>
<div id=note contenteditable=false style='position:absolute;left:300px;top:90px'>note-4403</div>
</body>"""
# (what the page does, whether a kept walk may answer after it without walking again)
CHANGES = [
    ("pw.value = 'pw-changed-5514'", True),
    ("pw.style.top = '200px'", True),  # moved: boxes are asked each time
    ("sheet.sheet.insertRule('.later { -webkit-text-security: square }')", True),
    ("typed.value = 'typed-6625'", True),  # :placeholder-shown no longer matches
    ("document.body.append(Object.assign(document.createElement('input'),"
     " {type: 'password', value: 'added-7736'}))", False),
    ("plain.type = 'password'", False),
    ("plain.type = 'text'; plain.setAttribute('autocomplete', 'cc-number')", False),
    ("host.attachShadow({mode: 'closed'}).innerHTML ="
     " \"<input type=password value='shadow-8847'>\"", False),
    ("note.setAttribute('style', 'position:absolute;left:300px;top:90px;"
     "-webkit-text-security:disc'); note.contentEditable = 'true'", False),
    ("const f = document.createElement('iframe'); f.srcdoc ="
     " \"<input type=password value='framed-9958'>\"; document.body.append(f);"
     " await new Promise(r => f.onload = r)", False),
    ("pw.remove()", False),
]  # fmt: skip


async def test_a_kept_walk_answers_as_a_fresh_walk_after_every_kind_of_change(
    rigs: RigManager,
) -> None:
    """After each change the page makes, the rig's probe (its kept walk, or a fresh one
    when the change staled it) finds exactly the boxes and values a probe on new sessions
    finds; and it walks again only after the changes that can change the fields."""
    assert not (await call(rigs, "tabs")).is_error
    rig = rigs.rigs[("ann", "browser", "")]
    page = await rig.page()
    await page.goto("data:text/html," + urllib.parse.quote(KEPT_PAGE))
    await page_secrets(rig.sessions, page, values=True)
    kept = rig.sessions.open[page]
    for change, keeps in CHANGES:
        walks = kept.fresh_walks
        await page.evaluate(f"async () => {{ {change} }}")
        got = await page_secrets(rig.sessions, page, values=True)
        fresh = PageSessions(DirectSessions(rig.bridge, rig.context), probing=rig.sessions.probing)
        try:
            want = await page_secrets(fresh, page, values=True)
        finally:
            await fresh.drop(page)
        assert (got.rects, sorted(got.values)) == (want.rects, sorted(want.values)), change
        assert (kept.fresh_walks == walks) is keeps, change
        assert want.values, change


async def test_a_busy_page_is_let_go_so_its_changes_do_not_stream_to_the_gateway(
    rigs: RigManager,
) -> None:
    """A page that keeps changing its fields: its kept walk goes stale and is let go at
    once (the DOM domain off: no more events reach the gateway) without waiting for the
    next probe, and that probe still finds every secret field."""
    assert not (await call(rigs, "tabs")).is_error
    rig = rigs.rigs[("ann", "browser", "")]
    page = await rig.page()
    await page.goto(_secret_page("busy-1234"))
    await page_secrets(rig.sessions, page, values=True)
    kept = rig.sessions.open[page]
    assert kept.kept
    await page.evaluate(
        "window.ticks = 0; setInterval(() => { const i = document.createElement('input');"
        " document.body.append(i); i.remove(); window.ticks++; }, 5)"
    )
    await wait_until(lambda: kept.walk is None)
    async with rig.sessions.probing:  # the let-go holds it until the domain is off
        seen = kept.staled
    ticks = await page.evaluate("window.ticks")
    await page.wait_for_function(f"window.ticks > {ticks + 20}")
    await kept.session.send("Runtime.evaluate", {"expression": "1"})  # events come before
    assert kept.staled == seen

    got = await page_secrets(rig.sessions, page, values=True)
    assert sorted(got.values) == ["busy-1234", "busy-1234-css"]


async def test_the_gateways_own_session_on_a_closed_page_fails_its_call_in_flight_at_once(
    rigs: RigManager,
) -> None:
    """The probe's and the screenshots' CDP calls go on sessions of the gateway's own on
    the rig's bridge (browser/direct.py), not through Playwright: a call waiting when its
    page closes fails then, saying so (Chromium tells the gateway's browser session),
    and Playwright's own work on the rig goes on."""
    assert not (await call(rigs, "tabs")).is_error
    rig = rigs.rigs[("ann", "browser", "")]
    page = await rig.context.new_page()
    session = await rig.sessions.direct.attach(page)
    never = {"expression": "new Promise(() => {})", "awaitPromise": True}
    failed: list[str] = []

    async def waiting() -> None:
        try:
            await session.send("Runtime.evaluate", never)
        except CdpCallFailed as exc:
            failed.append(str(exc))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(waiting)
            await anyio.wait_all_tasks_blocked()
            await page.close()
    assert failed == [f"Runtime.evaluate: {GONE}"]
    assert not (await call(rigs, "extract", mode="text")).is_error
