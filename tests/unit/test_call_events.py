"""Call events (issue 16) without Docker: the live view of a script's output, the log
levels, the gateway's NDJSON stream through the real gateway and forwarder, the phases of a
kiosk session start, and the event store behind SSE resumability."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_front.event_store import BoundedEventStore, approximate_size
from mcp_front.forwarder import forward
from mcp_front.reporting import DEFAULT_LEVEL, LogLevels, McpCallEvents
from orchestrator.audit import AuditLog
from orchestrator.config import CorralConfig
from orchestrator.gateway.wire import COMPUTER_USE_PATH, EVENTS_MEDIA_TYPE
from orchestrator.home import CorralHome
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.kiosk.sessions import SessionManager
from sandboxes.events import LOG_LEVELS, OutputTail, at_least
from tests.fakes import FakeClock, InMemoryBackend, fake_egress
from tests.gateway_helpers import (
    CALL,
    Gateway,
    Recorder,
    encode,
    running_gateway,
    serving_asgi,
    signed_headers,
)
from tests.unit.test_session_rules import write_agent

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@dataclass
class Heard:
    """A CallEvents that keeps everything it hears, in order."""

    seen: list[tuple[str, Any]] = field(default_factory=list)

    async def progress(
        self, phase: str, message: str, *, remaining: float | None = None, output: str = ""
    ) -> None:
        self.seen.append(("progress", (phase, message, remaining, output)))

    async def log(self, level: Any, event: str, details: Mapping[str, Any] | None = None) -> None:
        self.seen.append(("log", (level, event, dict(details or {}))))

    def phases(self) -> list[str]:
        return [value[0] for kind, value in self.seen if kind == "progress"]

    def logs(self) -> list[tuple[str, str]]:
        return [(value[0], value[1]) for kind, value in self.seen if kind == "log"]


# ------------------------------------------------------------------ the live output view
def test_the_tail_gives_complete_lines_once_and_in_order() -> None:
    tail = OutputTail()
    tail.feed(b"one\ntw")
    assert tail.take() == "one"
    tail.feed(b"o\nthree\n")
    assert tail.take() == "two\nthree"
    assert tail.take() == ""


def test_the_tail_keeps_the_newest_lines_within_its_budget_and_says_what_it_left_out() -> None:
    tail = OutputTail(budget=100)
    tail.feed(b"".join(b"line %02d\n" % n for n in range(30)))  # 8 bytes a line

    shown = tail.take()

    assert len(shown.encode()) <= 100
    lines = shown.splitlines()
    assert lines[-1] == "line 29"
    kept = len(lines) - 1
    assert lines[0] == f"[... {(30 - kept) * 8} bytes not shown]"
    assert lines[1:] == [f"line {n:02d}" for n in range(30 - kept, 30)]


def test_one_line_larger_than_the_budget_keeps_its_end() -> None:
    tail = OutputTail(budget=100)
    tail.feed(b"x" * 300 + b"END\n")

    shown = tail.take()

    assert shown.endswith("END") and len(shown.encode()) <= 100
    assert shown.startswith("[... ") and "bytes not shown]" in shown


def test_a_character_split_between_chunks_is_not_mangled() -> None:
    tail = OutputTail()
    data = "héllo wörld\n".encode()
    tail.feed(data[:2])
    tail.feed(data[2:])
    assert tail.take() == "héllo wörld"


def test_the_last_take_includes_an_unfinished_line() -> None:
    tail = OutputTail()
    tail.feed(b"done\nno newline")
    assert tail.take() == "done"
    assert tail.take(final=True) == "no newline"


# ------------------------------------------------------------------ log levels
def test_levels_are_ordered_as_syslog_and_default_to_info() -> None:
    assert LOG_LEVELS[0] == "debug" and LOG_LEVELS[-1] == "emergency"
    assert at_least("error", "warning") and not at_least("info", "notice")
    levels = LogLevels()
    assert levels.get("any session") == DEFAULT_LEVEL == "info"


def test_each_session_keeps_its_own_level_and_the_oldest_is_forgotten_first() -> None:
    levels = LogLevels(max_sessions=2)
    levels.set("a", "error")
    levels.set("b", "debug")
    levels.set("c", "warning")

    assert levels.get("a") == "info"  # forgotten: back to the default
    assert (levels.get("b"), levels.get("c")) == ("debug", "warning")


@dataclass
class _Session:
    sent: list[Any] = field(default_factory=list)

    async def send_notification(self, note: Any, related_request_id: Any = None) -> None:
        self.sent.append((note, related_request_id))

    async def report_progress(self, progress: float, total: float | None, message: str) -> None:
        self.sent.append((progress, total, message))


@dataclass
class _Ctx:
    session: _Session
    protocol_version: str = "2025-11-25"
    meta: Any = None
    request_id: int = 7
    request: Any = None


async def test_log_events_below_the_sessions_level_are_not_sent() -> None:
    levels = LogLevels()
    levels.set("stdio", "warning")
    ctx = _Ctx(_Session())
    events = McpCallEvents(ctx, levels)

    await events.log("info", "sandbox_started", {"kind": "script"})
    await events.log("warning", "session_lost", {"why": "test"})

    assert len(ctx.session.sent) == 1
    note, related = ctx.session.sent[0]
    assert isinstance(note, types.LoggingMessageNotification)
    assert note.params.level == "warning" and note.params.logger == "corral"
    assert note.params.data == {"event": "session_lost", "why": "test"}
    assert related == 7  # on the call's own stream: before its result


async def test_progress_only_grows_and_total_is_elapsed_plus_what_remains() -> None:
    clock = FakeClock(50.0)
    ctx = _Ctx(_Session())
    events = McpCallEvents(ctx, LogLevels(), clock=clock)

    clock.advance(1.0)
    await events.progress("running", "running: 1.0 s of 10 s", remaining=9.0, output="a\nb")
    await events.progress("running", "same instant")  # no time passed: still grows
    clock.advance(0.5)
    await events.progress("finished", "exit code 0")

    (p1, t1, m1), (p2, t2, _), (p3, t3, _) = ctx.session.sent
    assert (p1, t1, m1) == (1.0, 10.0, "running: 1.0 s of 10 s\na\nb")
    assert p2 > p1 and t2 is None
    assert p3 == 1.5 and t3 is None


# ------------------------------------------------------------------ the gateway's stream
@pytest.fixture
async def gateway(corral_home: CorralHome, free_tcp_port: int) -> AsyncIterator[Gateway]:
    recorder = Recorder(
        progress=[("container", "starting the kiosk container"), ("display", "starting")],
        logs=[("info", "session_ready")],
    )
    async with running_gateway(corral_home, "127.0.0.1", free_tcp_port, recorder) as gw:
        yield gw


async def test_the_forwarder_hands_on_the_gateways_events_in_order_before_the_result(
    gateway: Gateway,
) -> None:
    heard = Heard()

    result = await forward(
        gateway.home, gateway.url, "alice", "computer_click", {"x": 1, "y": 2}, events=heard
    )

    assert result.is_error is False
    assert result.structured_content == {
        "agent": "alice",
        "tool": "computer_click",
        "arguments": {"x": 1, "y": 2},
    }
    assert heard.seen == [
        ("progress", ("container", "starting the kiosk container", 5.0, "")),
        ("progress", ("display", "starting", 5.0, "")),
        ("log", ("info", "session_ready", {"tool": "computer_click"})),
    ]


async def test_the_stream_is_ndjson_ending_in_one_result_line(gateway: Gateway) -> None:
    body = encode({**CALL, "stream": True})
    async with gateway.client() as client:
        response = await client.post(
            COMPUTER_USE_PATH, content=body, headers=signed_headers(gateway.key, body)
        )

    assert response.status_code == 200
    assert response.headers["content-type"] == EVENTS_MEDIA_TYPE
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["kind"] for line in lines] == ["progress", "progress", "log", "result"]
    assert lines[-1]["answer"]["structured"] == CALL


async def test_events_are_streamed_chunked_and_a_result_alone_is_one_body_of_known_length(
    gateway: Gateway,
) -> None:
    """A call that reports events streams them (chunked, as they come); a call whose
    result comes first is answered as one body with its length: nothing to wait for
    after the result line (issue 23 item 9)."""
    body = encode({**CALL, "stream": True})
    async with gateway.client() as client:
        response = await client.post(
            COMPUTER_USE_PATH, content=body, headers=signed_headers(gateway.key, body)
        )
        assert response.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in response.headers

        gateway.handler.progress, gateway.handler.logs = [], []
        body = encode({**CALL, "stream": True})
        response = await client.post(
            COMPUTER_USE_PATH, content=body, headers=signed_headers(gateway.key, body)
        )
    assert response.headers["content-type"] == EVENTS_MEDIA_TYPE
    assert "transfer-encoding" not in response.headers
    assert int(response.headers["content-length"]) == len(response.content)
    (line,) = [json.loads(line) for line in response.text.splitlines()]
    assert line["kind"] == "result" and line["answer"]["structured"] == CALL


async def test_a_request_without_stream_still_gets_one_json_answer(gateway: Gateway) -> None:
    body = encode(CALL)
    async with gateway.client() as client:
        response = await client.post(
            COMPUTER_USE_PATH, content=body, headers=signed_headers(gateway.key, body)
        )

    assert response.headers["content-type"] == "application/json"
    assert response.json()["structured"] == CALL


@dataclass
class Blocking:
    """A handler that reports once, then waits until it is cancelled."""

    started: anyio.Event = field(default_factory=anyio.Event)
    cancelled: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(
        self, agent: str, tool: str, arguments: dict[str, Any], events: Any, conversation: str
    ) -> Answer:
        await events.progress("approval", "waiting for an operator", remaining=30.0)
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.set()
        raise AssertionError("unreachable")


async def test_a_front_that_hangs_up_cancels_the_call_in_the_gateway(
    corral_home: CorralHome, free_tcp_port: int
) -> None:
    handler = Blocking()
    async with running_gateway(corral_home, "127.0.0.1", free_tcp_port, handler) as gw:  # type: ignore[arg-type]
        body = encode({**CALL, "stream": True})
        async with (
            httpx.AsyncClient(base_url=gw.url, trust_env=False, timeout=30) as client,
            client.stream(
                "POST", COMPUTER_USE_PATH, content=body, headers=signed_headers(gw.key, body)
            ) as response,
        ):
            first = await response.aiter_lines().__anext__()
            assert json.loads(first)["message"] == "waiting for an operator"
            assert handler.started.is_set()
        # the client is closed: the gateway notices the hang-up and cancels the handler
        with anyio.fail_after(10):
            await handler.cancelled.wait()


# ------------------------------------------------------------------ kiosk start phases
async def test_a_session_start_reports_its_phases_and_says_when_it_is_ready(
    corral_home: CorralHome,
) -> None:
    write_agent(corral_home)
    manager = SessionManager(
        corral_home,
        CorralConfig(),
        InMemoryBackend(),
        AuditLog(corral_home.audit_file),
        fake_egress,
        clock=FakeClock(),
    )
    heard = Heard()

    answer = await manager.handle("alice", "computer_session_start", {}, heard)

    assert answer.is_error is False
    assert heard.phases() == ["egress", "container", "display", "browser"]
    assert heard.logs() == [("info", "sandbox_started"), ("info", "session_ready")]
    await manager.close_all()


# ------------------------------------------------------------------ SSE event store
def _note(text: str) -> Any:
    from mcp_types.jsonrpc import JSONRPCNotification

    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"t": text})


async def test_the_event_store_replays_only_the_same_streams_later_events() -> None:
    store = BoundedEventStore()
    prime = await store.store_event("s1", None)
    a = await store.store_event("s1", _note("a"))
    await store.store_event("s2", _note("other stream"))
    b = await store.store_event("s1", _note("b"))
    replayed: list[Any] = []

    async def collect(event: Any) -> None:
        replayed.append((event.event_id, event.message.params["t"]))

    assert await store.replay_events_after(prime, collect) == "s1"
    assert replayed == [(a, "a"), (b, "b")]
    assert await store.replay_events_after("not-an-id", collect) is None


async def test_the_event_store_forgets_its_oldest_events_past_its_bounds() -> None:
    store = BoundedEventStore(max_events=3, max_bytes=10_000)
    first = await store.store_event("s", _note("x"))
    for _ in range(3):
        await store.store_event("s", _note("y"))
    assert store.count == 3 and bool(BoundedEventStore())
    assert await store.replay_events_after(first, lambda event: anyio.sleep(0)) is None

    big = BoundedEventStore(max_events=100, max_bytes=5_000)
    for _ in range(4):
        await big.store_event("s", _note("z" * 2_000))
    assert big.count == 2 and big.bytes <= 5_000
    assert approximate_size(_note("z" * 2_000)) >= 2_000


def _streaming_gateway(*lines: bytes, chunk: int = 1000) -> ASGIApp:
    """A gateway stand-in that answers with these NDJSON lines, cut into small chunks (a
    chunked HTTP answer, each piece written on its own)."""
    body = b"".join(line + b"\n" for line in lines)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = b""
        while True:
            message = await receive()
            request += message.get("body", b"")
            if not message.get("more_body"):
                break
        assert json.loads(request)["stream"] is True
        headers = [(b"content-type", EVENTS_MEDIA_TYPE.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for start in range(0, len(body), chunk):
            piece = body[start : start + chunk]
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


async def test_a_result_line_in_many_chunks_is_read_whole(corral_home: CorralHome) -> None:
    image = "A" * 300_000
    result = json.dumps(
        {
            "kind": "result",
            "answer": {"content": [{"type": "image", "data": image, "mimeType": "image/png"}]},
        }
    ).encode()
    heard = Heard()
    progress = b'{"kind":"progress","phase":"p","message":"m"}'

    async with serving_asgi(_streaming_gateway(progress, result)) as url:
        answer = await forward(corral_home, url, "alice", "computer_screenshot", {}, events=heard)

    assert answer.is_error is False
    assert isinstance(answer.content[0], types.ImageContent)
    assert answer.content[0].data == image
    assert heard.phases() == ["p"]


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ((b"not json",), "cannot read"),
        ((b'{"kind":"progress","phase":"p","message":"m"}',), "without a result"),
        ((b'{"kind":"error","error":"internal error (incident 1)"}',), "incident 1"),
    ],
)
async def test_a_stream_without_a_readable_result_is_a_clear_tool_error(
    corral_home: CorralHome, lines: tuple[bytes, ...], says: str
) -> None:
    async with serving_asgi(_streaming_gateway(*lines)) as url:
        answer = await forward(corral_home, url, "alice", "computer_click", {})

    assert answer.is_error is True
    assert isinstance(answer.content[0], types.TextContent)
    assert says in answer.content[0].text
