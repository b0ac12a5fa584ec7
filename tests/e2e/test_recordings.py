"""Recordings (issue 24) end to end: a real MCP client -> corral mcp -> corral gateway ->
a kiosk on a local HTTPS site, a person typing a password through the console's live
view during a take over, the gateway killed mid-recording, the console's player in
Debian's Chromium, and `corral recordings` as an operator.

What a recording holds is judged on its own pixels: every frame of the video file is
decoded (PyAV) and read where the password field is."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import av
import docker
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from PIL import Image
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import async_playwright

from orchestrator.audit import AuditLog
from orchestrator.home import CorralHome
from orchestrator.recordings.store import RecordingMeta, RecordingStore
from tests.e2e.conftest import connect, wait_until
from tests.e2e.gateways import add_operator, running_gateway
from tests.e2e.person import console_login, live_view
from tests.e2e.test_computer_use import (
    PAGE,
    SITE,
    call,
    image_of,
    kiosk_config,
    screen_until,
    text_of,
    write_agent,
)
from tests.e2e.test_operators import corral
from tests.recorded import frames, reddish
from tests.sites import one_page_site

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

AGENT = "rita"
OPERATOR = "olga"
PASSWORD = "Sw0rdfish9"
FIELD = (100, 100, 300, 140)  # the password field: white, on a red page
CLICK = (700, 500)  # where the AI clicks (the red page: nothing happens)
# The field's inside, away from its edges (the codec smears an edge by a few pixels).
INSIDE = (FIELD[0] + 12, FIELD[1] + 8, FIELD[2] - 12, FIELD[3] - 8)
# A blue bar under the field, 10 px per character the field holds: how the test sees the
# person's typing landed (the field itself is masked).
LOGIN = PAGE.format(
    title="login",
    bg="#f00",
    body='<input id="p" type="password" style="position:absolute;left:100px;top:100px;'
    'width:200px;height:40px;background:#fff;border:0;font-size:30px">'
    '<div id="n" style="position:absolute;left:0;top:300px;height:20px;width:0;'
    'background:#00f"></div><script>p.oninput=()=>{n.style.width=(p.value.length*10)+"px"}'
    "</script>",
)


@pytest.fixture(scope="module")
def login_site(docker_client: docker.DockerClient) -> Iterator[tuple[str, str, str]]:
    with one_page_site(docker_client, SITE, LOGIN, "corral-e2e-rec-") as site:
        yield site


@pytest.fixture
def home(corral_home: CorralHome) -> CorralHome:
    write_agent(corral_home, AGENT, allowed_domains=[SITE])
    return corral_home


def red_page(img: Image.Image) -> bool:
    return reddish(img, (50, 50))


def field_dark(img: Image.Image) -> bool:
    """The password field's inside is black: masked (unmasked it is white, with dots)."""
    return max(high for _, high in img.crop(INSIDE).getextrema()) < 60


def typed_bar(img: Image.Image) -> int:
    """The page's count of the characters its field holds (its blue bar, 10 px each)."""
    row = [img.getpixel((x, 310)) for x in range(0, 400)]
    blue = sum(1 for r, g, b in row if b > 190 and r < 70 and g < 70)  # the codec's blue too
    return round(blue / 10)


def marked_near(img: Image.Image, point: tuple[int, int]) -> bool:
    """A magenta mark (a click's ring) within 20 px of `point`."""
    x, y = point
    near = img.crop((x - 20, y - 20, x + 20, y + 20)).tobytes()  # RGB triples
    pixels = zip(near[0::3], near[1::3], near[2::3], strict=True)
    return any(r > 150 and g < 110 and b > 110 for r, g, b in pixels)


def timeline(home: CorralHome, rid: str) -> list[dict[str, Any]]:
    return RecordingStore(home.recordings_dir).timeline(rid)


async def test_a_person_types_a_password_in_a_take_over_and_no_frame_shows_it(
    home: CorralHome, login_site: tuple[str, str, str]
) -> None:
    gateway = running_gateway(home, kiosk_config(login_site), recording=True)
    async with gateway as (base, _), connect(home, "stdio", agent=AGENT) as mcp:
        started = await call(mcp, "computer_session_start")
        rid = started.structured_content["session_id"]  # type: ignore[index]
        assert not (await call(mcp, "computer_navigate", url=f"https://{SITE}/")).is_error
        await screen_until(mcp, lambda r, img: red_page(img))
        assert not (await call(mcp, "computer_click", x=CLICK[0], y=CLICK[1])).is_error

        token = await anyio.to_thread.run_sync(add_operator, home, OPERATOR)
        async with (
            console_login(base, token) as client,
            live_view(base, client, AGENT) as person,
        ):
            await person.click(200, 120)  # console input takes the seat by itself
            await person.type(PASSWORD)
            typed = await screen_until(mcp, lambda r, img: typed_bar(img) == len(PASSWORD))
            assert field_dark(image_of(typed))
        back = await anyio.to_thread.run_sync(corral, home, "sessions", "handback", AGENT)
        assert back.returncode == 0, back.stderr
        assert not (await call(mcp, "computer_click", x=CLICK[0], y=CLICK[1])).is_error
        assert not (await call(mcp, "computer_session_stop")).is_error

    store = RecordingStore(home.recordings_dir)
    meta = store.meta(rid)
    assert meta.ended_by == "stopped by the agent" and meta.takeovers == 1, meta
    assert meta.actions >= 3 and meta.frames > 0, meta
    lines = timeline(home, rid)
    took = next(e["t"] for e in lines if e.get("tool") == "takeover")
    gave = next(e["t"] for e in lines if e.get("tool") == "handback")
    shown = frames(store.video(rid))
    assert len(shown) == meta.frames
    on_page = [(t, img) for t, img in shown if red_page(img)]
    assert on_page, "no frame of the login page"
    leaks = [t for t, img in on_page if not field_dark(img)]
    assert leaks == [], f"frames at {leaks} s show the password field"
    # The person's period is recorded: a frame while they held the seat, their typing in it.
    held = [img for t, img in on_page if took <= t <= gave + 0.5]
    assert any(typed_bar(img) == len(PASSWORD) for img in held), (took, gave, len(held))
    assert any(marked_near(img, CLICK) for _, img in on_page)  # the AI's click, drawn
    assert PASSWORD not in json.dumps(lines) and PASSWORD not in home.audit_file.read_text()
    assert stat_mode(store.video(rid)) == 0o600 and stat_mode(home.recordings_dir / rid) == 0o700
    await the_agent_reads_its_own_recording_only(home, rid)


def with_recording(home: CorralHome, agent: str) -> None:
    """`agent` (written already, or a new one) with `[capabilities] recording = true`."""
    path = home.agent_file(agent)
    if not path.exists():
        write_agent(home, agent)
    path.write_text(path.read_text().replace("recording = false", "recording = true"))


async def the_agent_reads_its_own_recording_only(home: CorralHome, rid: str) -> None:
    """Hidden without [capabilities] recording; with it, recording_list and recording_get
    show the agent's own recordings, the video and timeline as resource links only, and
    another agent's id or link is not found."""
    async with connect(home, "stdio", agent=AGENT) as mcp:
        assert not {"recording_list", "recording_get"} & await mcp.tool_names()
        with pytest.raises(MCPError, match=r"\[capabilities\] recording is off"):
            await call(mcp, "recording_list")
    with_recording(home, AGENT)
    with_recording(home, "vera")
    async with (
        connect(home, "stdio", agent=AGENT) as mcp,
        connect(home, "stdio", agent="vera") as vera,
    ):
        listed = await call(mcp, "recording_list")
        assert [r["recording_id"] for r in listed.structured_content["recordings"]] == [rid]  # type: ignore[index]
        got = await call(mcp, "recording_get", recording_id=rid)
        assert not got.is_error, text_of(got)
        assert not [b for b in got.content if isinstance(b, types.ImageContent)]  # links only
        links = {b.mime_type: b.uri for b in got.content if isinstance(b, types.ResourceLink)}
        read = await mcp.client.read_resource(links["video/webm"])
        (blob,) = read.contents
        assert isinstance(blob, types.BlobResourceContents) and blob.mime_type == "video/webm"
        played = home.root / "read.webm"
        played.write_bytes(base64.b64decode(blob.blob))
        assert any(red_page(img) for _, img in frames(played))
        timeline_read = await mcp.client.read_resource(links["application/x-ndjson"])
        (lines,) = timeline_read.contents
        assert isinstance(lines, types.BlobResourceContents)
        assert b'"takeover"' in base64.b64decode(lines.blob)

        assert (await call(vera, "recording_list")).structured_content == {"recordings": []}
        theirs = await call(vera, "recording_get", recording_id=rid)
        assert theirs.is_error and f"no recording {rid} of yours" in text_of(theirs)
        with pytest.raises(MCPError, match=f"no recording {rid} of yours"):
            await vera.client.read_resource(links["video/webm"])
    viewed = [e for e in AuditLog(home.audit_file).read() if e["event"] == "recording_read"]
    assert {e["agent"] for e in viewed} == {AGENT}


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


async def test_a_killed_gateways_recording_plays_in_the_console_and_exports(
    home: CorralHome, login_site: tuple[str, str, str], docker_client: docker.DockerClient
) -> None:
    config = kiosk_config(login_site)
    async with (
        running_gateway(home, config, recording=True) as (_, pid),
        connect(home, "stdio", agent=AGENT) as mcp,
    ):
        started = await call(mcp, "computer_session_start")
        rid = started.structured_content["session_id"]  # type: ignore[index]
        assert not (await call(mcp, "computer_navigate", url=f"https://{SITE}/")).is_error
        await screen_until(mcp, lambda r, img: red_page(img))
        for x in (500, 600, 700):
            assert not (await call(mcp, "computer_click", x=x, y=500)).is_error
        video = home.recordings_dir / rid / "video.ivf"  # written frame by frame

        def plays() -> bool:
            try:
                return any(red_page(img) for _, img in frames(video))
            except (OSError, av.error.FFmpegError):
                return False

        await wait_until(plays, limit=30)  # the live file plays as it is written
        os.kill(pid, signal.SIGKILL)
        assert plays()  # and still, as the killed gateway left it
        owned = {"label": [f"corral.owner.pid={pid}"]}
        await wait_until(
            lambda: not docker_client.containers.list(ignore_removed=True, all=True, filters=owned),
            limit=60,
        )
    token = add_operator(home, OPERATOR)
    async with running_gateway(home, config, recording=True) as (base, _):  # finishes it
        meta = RecordingStore(home.recordings_dir).meta(rid)
        assert meta.ended_by == "the gateway was killed", meta
        await plays_in_the_console(base, token, meta)
    exported_and_removed(home, meta)


@contextlib.asynccontextmanager
async def console_page(base: str, token: str) -> AsyncIterator[Any]:
    """The console in Debian's Chromium, logged in as the operator."""
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
        try:
            page = await chromium.new_page(viewport={"width": 1600, "height": 1000})
            await page.goto(f"{base}/console/login")
            await page.fill("#token", token)
            await page.click("#login")
            # The login's redirect has set the session cookie: a page opened before it came
            # gets 401 from its state API and its script goes back to the login page.
            await page.wait_for_url(f"{base}/console/")
            await module_ran(page)
            yield page
        finally:
            await chromium.close()


PLAYER = "document.getElementById('player')"


async def holds(page: Any, expression: str) -> bool:
    # Polled from here: the console's CSP forbids the eval wait_for_function uses.
    return bool(await page.evaluate(expression))


async def module_ran(page: Any) -> None:
    """Wait until the page's module ran. A console page whose module has not started 4 s
    after it loaded reloads itself (boot.js: Chromium cuts in-flight loads with
    ERR_NETWORK_CHANGED whenever any test's container makes a network, and a loaded
    machine can be that slow); a poll that lands in that reload finds no page, so it is
    read as "not yet". Once the module ran, nothing reloads the page: every later poll may
    rely on the page it reads (run e-1 polled one that went away under it)."""

    async def ran() -> bool:
        try:
            return await holds(page, "window.corralStarted === true")
        except PlaywrightError as exc:
            if "Execution context was destroyed" in str(exc):
                return False
            raise

    await wait_until(ran, limit=30)


async def seeks_to_the_entry_clicked(page: Any, time_of: str) -> None:
    """Clicking the last timeline entry seeks the player to it (`time_of`: how the page
    reads an entry's time, in JS, of `li`) and marks the entry of the moment."""
    last = page.locator("#timeline li").last
    at = float(await last.evaluate(f"(li) => {time_of}"))
    await last.click()
    await wait_until(lambda: holds(page, f"Math.abs({PLAYER}.currentTime - {at}) < 0.6"))
    await wait_until(lambda: holds(page, "document.querySelector('#timeline li.current')"))


async def plays_in_the_console(base: str, token: str, meta: RecordingMeta) -> None:
    """The past sessions page lists it; its player plays, seeks where a timeline entry is
    clicked, and marks the entry of the moment."""
    async with console_page(base, token) as page:
        await page.click("#past")  # a page of server-rendered rows: no script to wait for
        await page.click(f'tr[data-recording="{meta.id}"] a')
        await module_ran(page)
        await page.locator("#timeline li").first.wait_for()
        await wait_until(lambda: holds(page, f"{PLAYER}.readyState >= 1"))
        await page.evaluate(f"{PLAYER}.play()")
        # It plays: past 0.3 s, or half of a shorter recording (a fast session's is about
        # 0.3 s long: two frames; a fixed 0.3 s failed when the calls got faster).
        played = f"{PLAYER}.currentTime > Math.min(0.3, {PLAYER}.duration / 2)"
        await wait_until(lambda: holds(page, played))
        await seeks_to_the_entry_clicked(page, "Number(li.dataset.t)")


async def test_a_live_sessions_page_plays_its_recording_so_far(
    home: CorralHome, login_site: tuple[str, str, str]
) -> None:
    gateway = running_gateway(home, kiosk_config(login_site), recording=True)
    async with gateway as (base, _), connect(home, "stdio", agent=AGENT) as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        assert not (await call(mcp, "computer_navigate", url=f"https://{SITE}/")).is_error
        await screen_until(mcp, lambda r, img: red_page(img))
        for x in (500, 600, 700):
            assert not (await call(mcp, "computer_click", x=x, y=500)).is_error
        await call(mcp, "computer_screenshot")
        token = await anyio.to_thread.run_sync(add_operator, home, OPERATOR)
        async with console_page(base, token) as page:
            await page.goto(f"{base}/console/sessions/{AGENT}")
            await module_ran(page)
            state = page.locator("#recording-state")
            await wait_until(lambda: holds(page, "document.getElementById('recording-state')"
                                           ".textContent.startsWith('recording ')"))  # fmt: skip
            assert "stopped" not in (await state.text_content() or "")
            await page.click("#latest")
            await wait_until(lambda: holds(page, f"{PLAYER}.readyState >= 1"))
            started = await page.evaluate(
                "fetch('/console/api/state?agent=rita').then((r) => r.json())"
                ".then((d) => d.recording.started_at)"
            )
            await seeks_to_the_entry_clicked(page, f"Number(li.dataset.at) - {started}")
        assert not (await call(mcp, "computer_session_stop")).is_error


def exported_and_removed(home: CorralHome, meta: RecordingMeta) -> None:
    listed = corral(home, "recordings", "list", "--json", operator=OPERATOR)
    assert listed.returncode == 0, listed.stderr
    assert meta.id in [json.loads(line)["id"] for line in listed.stdout.splitlines()]
    refused = corral(home, "recordings", "list", operator=None)
    assert refused.returncode == 2 and "operator token" in refused.stderr
    out = home.root / "export"
    done = corral(home, "recordings", "export", meta.id, "--out", str(out), operator=OPERATOR)
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["MANIFEST.sha256", "audit.jsonl", "meta.json", "timeline.jsonl", "video.webm"]
    audit = [json.loads(line) for line in (out / "audit.jsonl").read_text().splitlines()]
    assert {"computer_session_started", "computer_action"} <= {e["event"] for e in audit}
    check = subprocess.run(["sha256sum", "-c", "MANIFEST.sha256"], cwd=out, capture_output=True)
    assert check.returncode == 0, check.stdout
    gone = corral(home, "recordings", "rm", meta.id, operator=OPERATOR)
    assert gone.returncode == 0, gone.stderr
    assert not (home.recordings_dir / meta.id).exists()
    exported = [json.loads(line) for line in home.audit_file.read_text().splitlines()]
    assert [e["details"]["operator"] for e in exported if e["event"] == "recording_removed"] == [
        OPERATOR
    ]
