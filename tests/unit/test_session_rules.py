"""The kiosk session rules, run through the real SessionManager and KioskChannel on an
in-memory backend (tests/fakes.py) with a clock the test moves: one session per agent,
the action budget, the idle timeout, the maximum lifetime and why a session ended. The
same paths against Docker and the real kiosk: tests/e2e/test_computer_use.py."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.kiosk.sessions import SessionManager
from orchestrator.surfaces.screenshots import channel_frame
from sandboxes.errors import SessionRefused
from sandboxes.png import encode_rgb
from sandboxes.session_rules import COUNTED, SessionClock
from tests.fakes import FakeClock, FakeEgress, InMemoryBackend, png_claiming, png_of

pytestmark = [pytest.mark.unit, pytest.mark.anyio]

SITE = "site.example"


def write_agent(home: CorralHome, name: str = "alice", **cfg: Any) -> None:
    text = render_new_agent(name).replace("computer_use = false", "computer_use = true")
    settings = {"allowed_domains": [SITE], **cfg}
    table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items())
    text = text.replace(
        "[capabilities.computer_use_config]\nmax_actions = 50\nallowed_domains = []\n",
        f"[capabilities.computer_use_config]\n{table}",
    )
    path = home.agent_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def text_of(answer: Answer) -> str:
    return answer.text


def events(home: CorralHome, name: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in Path(home.audit_file).read_text().splitlines()]
    return [row for row in rows if row["event"] == name]


async def call(manager: SessionManager, tool: str, **arguments: Any) -> Answer:
    return await manager.handle("alice", tool, arguments)


async def test_one_session_per_agent_and_a_new_one_after_stop(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    first = await call(manager, "computer_session_start")
    again = await call(manager, "computer_session_start")

    assert first.is_error is False
    assert again.is_error is True
    assert "one session per agent" in text_of(again)
    assert len(backend.opened) == 1

    stopped = await call(manager, "computer_session_stop")
    second = await call(manager, "computer_session_start")

    assert stopped.is_error is False
    assert second.is_error is False
    assert second.structured["session_id"] != first.structured["session_id"]
    assert len(backend.live) == 1 and len(backend.removed) == 1


async def test_the_budget_counts_actions_and_refuses_the_next_one(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home, max_actions=3)
    await call(manager, "computer_session_start")

    answers = [await call(manager, "computer_click", x=1, y=1) for _ in range(3)]
    refused = await call(manager, "computer_key", key="Return")
    shot = await call(manager, "computer_screenshot")

    assert [a.is_error for a in answers] == [False, False, False]
    assert "Actions used: 3/3" in text_of(answers[-1])
    assert refused.is_error is True
    assert "3 actions are used up" in text_of(refused)
    assert shot.is_error is False  # screenshots are free
    assert [r["op"] for r in backend.opened[0].requests].count("key") == 0
    assert events(corral_home, "computer_action_refused")[-1]["details"]["why"] == "budget"


async def test_a_refused_url_does_not_spend_an_action(
    corral_home: CorralHome, manager: SessionManager
) -> None:
    write_agent(corral_home, max_actions=1)
    await call(manager, "computer_session_start")

    refused = await call(manager, "computer_navigate", url="https://elsewhere.example/")
    opened = await call(manager, "computer_navigate", url=f"https://{SITE}/")

    assert refused.is_error is True
    assert "not in this agent's allowed_domains" in text_of(refused)
    assert opened.is_error is False
    assert "Actions used: 1/1" in text_of(opened)


async def test_an_idle_session_ends_and_says_why(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend, clock: FakeClock
) -> None:
    write_agent(corral_home, idle_timeout_seconds=30)
    await call(manager, "computer_session_start")
    clock.advance(29)
    await call(manager, "computer_click", x=1, y=1)  # resets the idle timer
    clock.advance(29)

    assert await manager.expire() == []
    clock.advance(1)
    assert await manager.expire() == ["alice"]

    after = await call(manager, "computer_screenshot")
    assert after.is_error is True
    assert "Your session ended: it was idle for 30 s" in text_of(after)
    assert backend.live == {}
    ended = events(corral_home, "computer_session_ended")
    assert ended[-1]["details"]["why"] == "it was idle for 30 s"
    assert ended[-1]["details"]["actions"] == 1


async def test_a_screenshot_does_not_keep_a_session_alive(
    corral_home: CorralHome, manager: SessionManager, clock: FakeClock
) -> None:
    write_agent(corral_home, idle_timeout_seconds=10)
    await call(manager, "computer_session_start")
    clock.advance(9)
    await call(manager, "computer_screenshot")
    clock.advance(1)

    assert await manager.expire() == ["alice"]


async def test_a_busy_session_ends_at_its_lifetime(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend, clock: FakeClock
) -> None:
    write_agent(corral_home, idle_timeout_seconds=10, max_lifetime_seconds=25)
    await call(manager, "computer_session_start")
    for _ in range(4):
        clock.advance(6)
        await call(manager, "computer_scroll", x=5, y=5)
        assert await manager.expire() == []
    clock.advance(1)

    assert await manager.expire() == ["alice"]
    after = await call(manager, "computer_click", x=1, y=1)
    assert "Your session ended: it reached its 25 s lifetime" in text_of(after)
    assert backend.live == {}


async def test_the_reasons_a_session_ended_stop_and_gateway_shutdown(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    await call(manager, "computer_session_start")
    await call(manager, "computer_session_stop")
    await call(manager, "computer_session_start")
    await manager.close_all()

    whys = [e["details"]["why"] for e in events(corral_home, "computer_session_ended")]
    assert whys == ["stopped by the agent", "the gateway stopped"]
    assert backend.live == {} and len(backend.removed) == 2
    after = await call(manager, "computer_screenshot")
    assert "Your session ended: the gateway stopped" in text_of(after)


async def test_a_kiosk_that_dies_ends_the_session_at_once_and_says_why(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    backend.kiosk_options["close_on"] = {"click"}
    await call(manager, "computer_session_start")
    # The agent answers the click, then its stream ends: the next request finds it closed.
    await call(manager, "computer_click", x=1, y=1)
    failed = await call(manager, "computer_type", text="hello")
    after = await call(manager, "computer_click", x=1, y=1)

    assert failed.is_error is True
    assert "kiosk channel closed" in text_of(failed)
    assert "Your session ended: its kiosk failed" in text_of(failed)
    assert backend.live == {}  # removed now, not at the idle timeout
    assert "Your session ended: its kiosk failed (the kiosk channel closed" in text_of(after)
    assert "computer_session_start" in text_of(after)


async def test_a_kiosk_that_floods_its_channel_is_removed_and_the_session_ends(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    backend.kiosk_options["flood_on"] = {"screenshot"}
    await call(manager, "computer_session_start")

    shot = await call(manager, "computer_screenshot")

    assert shot.images and shot.content[0] is shot.images[0]  # never an error without one
    assert shot.structured["masked"] is True
    assert "without a line end (a flood)" in text_of(shot)
    assert "Your session ended: its kiosk failed" in text_of(shot)
    assert backend.live == {}
    ended = events(corral_home, "computer_session_ended")
    assert "flood" in ended[-1]["details"]["why"]


async def test_a_failed_start_leaves_no_container_and_no_session(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    backend.kiosk_options["fail_ops"] = {"start"}

    failed = await call(manager, "computer_session_start")
    backend.kiosk_options.clear()
    retried = await call(manager, "computer_session_start")

    assert failed.is_error is True
    assert "could not start" in text_of(failed)
    assert retried.is_error is False
    assert len(backend.opened) == 2 and len(backend.live) == 1


async def test_typed_text_is_never_audited(
    corral_home: CorralHome, manager: SessionManager
) -> None:
    write_agent(corral_home)
    await call(manager, "computer_session_start")
    await call(manager, "computer_type", text="hunter2-secret")

    assert "hunter2-secret" not in Path(corral_home.audit_file).read_text()


# ------------------------------------------------------------------ SessionClock, pure


def make_clock(**kw: Any) -> SessionClock:
    values = {"max_actions": 2, "idle_timeout": 10, "max_lifetime": 100, "started": 0.0}
    values.update(kw)
    return SessionClock(last_action=values["started"], **values)


def test_only_the_counted_tools_use_the_budget() -> None:
    assert {"computer_screenshot", "computer_session_start", "computer_session_stop"}.isdisjoint(
        COUNTED
    )
    clock = make_clock(max_actions=1)
    clock.spend(1.0)

    clock.check_budget("computer_screenshot")
    with pytest.raises(SessionRefused, match="1 actions are used up"):
        clock.check_budget("computer_click")


@pytest.mark.parametrize(
    ("now", "last", "why"),
    [
        (9.9, 0.0, None),
        (10.0, 0.0, "it was idle for 10 s"),
        (99.9, 95.0, None),
        (100.0, 99.0, "it reached its 100 s lifetime"),
        (150.0, 0.0, "it reached its 100 s lifetime"),  # lifetime first
    ],
)
def test_expiry_is_exact_at_the_limits(now: float, last: float, why: str | None) -> None:
    clock = make_clock()
    clock.last_action = last

    assert clock.expiry(now) == why


def test_time_left_never_goes_negative() -> None:
    assert make_clock().time_left(1000.0) == (0, 0)


async def test_a_bad_allowlist_entry_is_a_clear_refusal_not_an_internal_error(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home, allowed_domains=["Bücher.example"])

    refused = await call(manager, "computer_session_start")

    assert refused.is_error is True
    assert "allowed_domains" in text_of(refused)
    assert "xn--bcher-kva.example" in text_of(refused)
    assert backend.opened == []


async def test_the_start_result_says_which_names_were_left_out_and_why(
    corral_home: CorralHome, manager: SessionManager
) -> None:
    write_agent(corral_home, allowed_domains=["dead.example"])

    started = await call(manager, "computer_session_start")

    text = text_of(started)
    assert "allowed_domains is empty" not in text
    assert "every allowed name was left out" in text
    assert "dead.example (the name does not resolve)" in text
    assert started.structured["left_out"] == {"dead.example": "the name does not resolve"}


async def test_a_partly_resolved_allowlist_lists_both(
    corral_home: CorralHome, manager: SessionManager
) -> None:
    write_agent(corral_home, allowed_domains=[SITE, "dead.example"])

    text = text_of(await call(manager, "computer_session_start"))

    assert f"may open: {SITE} (left out: dead.example (the name does not resolve))" in text


@pytest.mark.parametrize(
    "revoke",
    ["capability_off", "agent_deleted", "tools_denied", "read_only", "file_broken"],
)
async def test_revoking_access_ends_the_session_within_one_expiry_pass(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend, revoke: str
) -> None:
    write_agent(corral_home)
    await call(manager, "computer_session_start")
    path = corral_home.agent_file("alice")
    text = path.read_text()
    if revoke == "capability_off":
        path.write_text(text.replace("computer_use = true", "computer_use = false"))
    elif revoke == "agent_deleted":
        path.unlink()
    elif revoke == "tools_denied":
        path.write_text(text.replace("denied_tools = []", 'denied_tools = ["computer_*"]'))
    elif revoke == "read_only":
        path.write_text(text.replace("read_only = false", "read_only = true"))
    else:
        path.write_text(text + "\nnot toml at all [[[\n")

    assert await manager.expire() == ["alice"]  # the gateway runs this every second

    assert backend.live == {}
    ended = events(corral_home, "computer_session_ended")
    assert ended[-1]["details"]["why"].startswith("its access was revoked")
    after = await call(manager, "computer_screenshot")
    assert after.is_error is True


async def test_a_call_after_revocation_ends_the_session_and_says_why(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home)
    await call(manager, "computer_session_start")
    path = corral_home.agent_file("alice")
    path.write_text(path.read_text().replace("computer_use = true", "computer_use = false"))

    refused = await call(manager, "computer_click", x=1, y=1)

    assert refused.is_error is True
    assert "Your session ended: its access was revoked" in text_of(refused)
    assert backend.live == {}


async def test_allowlist_and_deny_list_changes_apply_from_the_next_call(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    write_agent(corral_home, allowed_domains=[SITE, "other.example"])
    await call(manager, "computer_session_start")
    kiosk = backend.opened[0]
    kiosk.probe = {**kiosk.probe, "url": f"https://{SITE}/account"}
    assert (await call(manager, "computer_screenshot")).structured["masked"] is False

    write_agent(corral_home, allowed_domains=["other.example"], deny_list=[SITE])
    shot = await call(manager, "computer_screenshot")
    nav = await call(manager, "computer_navigate", url=f"https://{SITE}/")
    still = await call(manager, "computer_navigate", url="https://other.example/")
    write_agent(corral_home, allowed_domains=["other.example", "new.example"])
    added = await call(manager, "computer_navigate", url="https://new.example/")

    assert shot.structured["masked"] is True and SITE in text_of(shot)
    assert nav.is_error is True and "not in this agent's allowed_domains" in text_of(nav)
    assert still.is_error is False
    assert added.is_error is True and "was not resolved when the session started" in (
        text_of(added)
    )


async def test_a_host_removed_from_the_allowlist_loses_its_route_without_a_call(
    corral_home: CorralHome, manager: SessionManager
) -> None:
    write_agent(corral_home, allowed_domains=[SITE, "other.example"])
    await call(manager, "computer_session_start")
    egress = manager.sessions["alice"].egress
    assert isinstance(egress, FakeEgress)

    write_agent(corral_home, allowed_domains=["other.example"])
    await manager.expire()  # the gateway's pass every second; no call from the agent

    assert egress.restricted == [("other.example",)]
    assert set(egress.pins) == {"other.example"}
    narrowed = events(corral_home, "computer_allowlist_narrowed")
    assert narrowed[-1]["details"]["removed"] == [SITE]
    write_agent(corral_home, allowed_domains=[SITE, "other.example"])
    back = await call(manager, "computer_navigate", url=f"https://{SITE}/")
    assert "was not resolved when the session started" in text_of(back)  # never re-added
    assert egress.restricted == [("other.example",)]


@pytest.mark.parametrize(
    "shot_fields",
    [
        {"png": "not base64 at all!"},
        {"probe": {"windows": 1, "focused_ok": True, "password_rects": [["x", 1, 2, 3]]}},
        {"probe": {"windows": "many"}},
        {"png": None},
    ],
)
async def test_any_failure_in_the_screenshot_path_answers_a_black_image_saying_why(
    corral_home: CorralHome,
    manager: SessionManager,
    backend: InMemoryBackend,
    shot_fields: dict[str, Any],
) -> None:
    write_agent(corral_home)
    backend.kiosk_options["shot_fields"] = shot_fields
    await call(manager, "computer_session_start")

    shot = await call(manager, "computer_screenshot")

    assert shot.is_error is False
    image = shot.content[0]
    assert image in shot.images
    with Image.open(io.BytesIO(shot.images[0].png)) as png:
        assert png.size == (1280, 800)
        assert png.convert("RGB").getextrema() == ((0, 0), (0, 0), (0, 0))  # all black
    assert shot.structured["masked"] is True
    assert "could not be checked (incident" in text_of(shot)


def zero_png(width: int, height: int) -> bytes:
    """A real black PNG of `width` x `height`: a few KiB that decode to megabytes."""
    return encode_rgb(bytes(width * height * 3), width, height)


LIES = {
    "not a PNG": {"png": base64.b64encode(b"GIF89a not a png").decode()},
    # the answer's own size fields, with a probe that masks the whole screen
    "size fields": {"width": 9000, "height": 9000, "probe": {"windows": 2}},
    # a real PNG, six times the screen, with a field to paint (the gateway decoded it)
    "big PNG": {"png": base64.b64encode(zero_png(6000, 4000)).decode()},
    "PNG header": {"png": base64.b64encode(png_claiming(60000, 60000)).decode()},
}


@pytest.mark.parametrize("lie", list(LIES))
async def test_a_kiosk_that_lies_about_its_screens_size_gets_the_sessions_black_screen(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend, lie: str
) -> None:
    """Attack: a compromised kiosk answers a screenshot with another size than the
    session's, in its answer's fields or in its PNG (a small PNG can claim gigabytes of
    pixels). The gateway allocated for the size it was told (the whole-screen mask at
    9000x9000, the 6000x4000 PNG decoded, painted and sent on); now the session's own size
    is the screen's, and an image of another is answered black at that size, saying why."""
    write_agent(corral_home)
    backend.kiosk_options["probe"] = {
        "windows": 1,
        "focused_ok": True,
        "password_rects": [[10, 10, 50, 20]],
        "url": "https://site.example/",
        "title": "",
    }
    backend.kiosk_options["shot_fields"] = LIES[lie]
    await call(manager, "computer_session_start")

    shot = await call(manager, "computer_screenshot")

    assert shot.is_error is False and shot.structured["masked"] is True
    with Image.open(io.BytesIO(shot.images[0].png)) as png:
        assert png.size == (1280, 800)
        assert png.convert("RGB").getextrema() == ((0, 0), (0, 0), (0, 0))  # all black
    if lie != "size fields":
        assert "not the screen's 1280x800" in text_of(shot), text_of(shot)


async def test_a_recording_frame_of_unchanged_pixels_is_the_last_frame_again(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    """A recorder's frame asks the kiosk for its pixels' digest, and to answer `same`
    (no probe, no PNG) while they are still the last frame's: that frame is reused. Pixels
    that changed, a deny list that changed since, or a last frame masked whole: a whole
    screenshot again. The AI's own screenshots never ask."""
    write_agent(corral_home)
    await call(manager, "computer_session_start")
    kiosk, session = backend.opened[0], manager.sessions["alice"]
    shots = lambda: [r for r in kiosk.requests if r["op"] == "screenshot"]  # noqa: E731

    first = await channel_frame(session)
    again = await channel_frame(session)
    asked = shots()
    assert again is first and first.blacked is None
    assert asked[0]["digest"] is True and "unless" not in asked[0]
    assert asked[1]["digest"] is True and len(asked[1]["unless"]) == 64

    kiosk.shot_fields = {"png": base64.b64encode(png_of(1280, 800, (0, 0, 255))).decode()}
    changed = await channel_frame(session)  # new pixels: a whole screenshot, masked
    assert changed is not first and changed.png == kiosk_png(kiosk)
    assert await channel_frame(session) is changed

    session.deny_list = ("site.example/secret",)  # the operator changed it: checked again
    assert await channel_frame(session) is not changed
    assert await call(manager, "computer_screenshot")  # the AI's: a whole one, never `same`
    assert "digest" not in shots()[-1]

    kiosk.probe = {"windows": 2}  # masked whole: never reused
    black = await channel_frame(session)
    assert black.blacked is not None and await channel_frame(session) is not black


def kiosk_png(kiosk: Any) -> bytes:
    return base64.b64decode(kiosk.shot_fields["png"])


async def test_fields_the_kiosk_already_painted_pass_through_and_others_are_painted_here(
    corral_home: CorralHome, manager: SessionManager, backend: InMemoryBackend
) -> None:
    """The kiosk paints secret fields black before encoding and says which; the gateway
    passes such a PNG through only when those are exactly the rectangles its own plan
    masks, and otherwise decodes it and paints them itself."""
    write_agent(corral_home)
    field = [100, 100, 200, 40]
    padded = [98, 98, 204, 44]  # PAD = 2 on every side
    backend.kiosk_options["probe"] = {
        "windows": 1,
        "focused_ok": True,
        "password_rects": [field],
        "url": "https://site.example/",
        "title": "",
    }
    await call(manager, "computer_session_start")
    kiosk = backend.opened[0]
    sent = base64.b64encode(png_of(1280, 800)).decode()  # white: nothing painted in it

    kiosk.shot_fields = {"png": sent, "painted": [padded]}
    trusted = await call(manager, "computer_screenshot")
    kiosk.shot_fields = {"png": sent, "painted": [[0, 0, 1, 1]]}
    checked = await call(manager, "computer_screenshot")

    assert trusted.images[0].png == base64.b64decode(sent)  # passed through, not re-encoded
    assert trusted.structured["masked_fields"] == 1
    with Image.open(io.BytesIO(checked.images[0].png)) as png:
        assert png.convert("RGB").getpixel((200, 120)) == (0, 0, 0)  # painted here
        assert png.convert("RGB").getpixel((50, 50)) == (255, 255, 255)
