"""The signed loopback channel end to end (SPEC S2.2, docs/kiosk-internals.md s1): the real
gateway under uvicorn, real HTTP from httpx and from the MCP-side forwarder."""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.types import Message

from mcp_front.forwarder import forward, gateway_base_url, gateway_client, not_running_message
from orchestrator.audit import AuditLog
from orchestrator.errors import GatewayStartError
from orchestrator.gateway.app import create_app, serve_gateway
from orchestrator.gateway.signing import (
    HEADER_NONCE,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    load_or_create_key,
    new_nonce,
    sign,
)
from orchestrator.gateway.wire import COMPUTER_USE_PATH
from orchestrator.home import CorralHome
from orchestrator.surfaces.answers import Answer, Image, answer, error, image_block, text_block
from tests.gateway_helpers import (
    CALL,
    TINY_PNG,
    Gateway,
    Recorder,
    encode,
    running_gateway,
    signed_headers,
)

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@pytest.fixture
async def gateway(corral_home: CorralHome, free_tcp_port: int) -> AsyncIterator[Gateway]:
    async with running_gateway(corral_home, "127.0.0.1", free_tcp_port, Recorder()) as gw:
        yield gw


# --------------------------------------------------------------- accepted
async def test_healthz_answers_ok_without_a_signature(gateway: Gateway) -> None:
    async with gateway.client() as client:
        response = await client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"ok": True}


async def test_a_signed_call_reaches_the_handler_and_returns_its_answer(gateway: Gateway) -> None:
    body = encode(CALL)
    async with gateway.client() as client:
        response = await client.post(
            COMPUTER_USE_PATH, content=body, headers=signed_headers(gateway.key, body)
        )

    assert response.status_code == 200, response.text
    assert gateway.handler.calls == [("alice", "computer_click", {"x": 10, "y": 20})]
    answer = response.json()
    assert answer["is_error"] is False
    assert answer["structured"] == CALL
    assert json.loads(answer["content"][0]["text"]) == CALL  # the wire, as rendered
    assert gateway.refusals() == []


@asynccontextmanager
async def gateway_client_kept_open(home: CorralHome, port: int) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as client:
        with anyio.fail_after(15):
            async with running_gateway(home, "127.0.0.1", port, Recorder()):
                assert (await client.get("/healthz")).status_code == 200
        yield client


async def test_a_cancelled_gateway_stops_listening_even_with_a_connection_open(
    corral_home: CorralHome, free_tcp_port: int
) -> None:
    async with gateway_client_kept_open(corral_home, free_tcp_port) as client:
        # The gateway is gone although this keep-alive connection was never closed.
        with pytest.raises(httpx.TransportError):
            await client.get("/healthz")

    result = await forward(
        corral_home, gateway_base_url("127.0.0.1", free_tcp_port), "alice", "computer_key", {}
    )
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text.startswith("corral gateway is not running at ")


async def test_a_busy_port_is_a_clear_start_error(
    corral_home: CorralHome, free_tcp_port: int
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_tcp_port))
        taken.listen()
        with pytest.raises(GatewayStartError, match=f"cannot listen on 127.0.0.1:{free_tcp_port}"):
            await serve_gateway(corral_home, "127.0.0.1", free_tcp_port, Recorder())


# --------------------------------------------------------------- refused: 401
async def refused(gateway: Gateway, body: bytes, headers: dict[str, str]) -> httpx.Response:
    async with gateway.client() as client:
        return await client.post(COMPUTER_USE_PATH, content=body, headers=headers)


def assert_refused(gateway: Gateway, response: httpx.Response, status: int, reason: str) -> None:
    assert response.status_code == status, response.text
    assert response.json() == {"error": reason}
    last = gateway.refusals()[-1]
    assert last == {"reason": reason, "path": COMPUTER_USE_PATH, "peer": "127.0.0.1"}


async def test_an_unsigned_call_is_refused_with_401_and_audited(gateway: Gateway) -> None:
    response = await refused(gateway, encode(CALL), {"Content-Type": "application/json"})

    assert_refused(gateway, response, 401, "missing header X-Corral-Timestamp")
    assert gateway.handler.calls == []


async def test_a_bad_signature_is_refused_with_401_and_audited(gateway: Gateway) -> None:
    body = encode(CALL)
    headers = signed_headers(gateway.key, body)
    headers[HEADER_SIGNATURE] = "0" * 64

    assert_refused(gateway, await refused(gateway, body, headers), 401, "bad signature")
    assert gateway.handler.calls == []


async def test_a_call_signed_with_another_key_is_refused(gateway: Gateway) -> None:
    body = encode(CALL)
    headers = signed_headers(b"\x01" * 32, body)

    assert_refused(gateway, await refused(gateway, body, headers), 401, "bad signature")


# The window is inclusive: a whole-second timestamp at most 30 s from the gateway's clock is
# fresh. Both clocks are fixed here, so the boundary is tested exactly (with time.time(), the
# signer's truncation to whole seconds let +31 s land inside the window now and then).
NOW = 1_800_000_000.0


@pytest.mark.parametrize(("offset", "status"), [(-31, 401), (-30, 200), (30, 200), (31, 401)])
async def test_a_timestamp_more_than_30_s_off_is_refused_with_401_and_audited(
    corral_home: CorralHome, offset: int, status: int
) -> None:
    handler = Recorder()
    app = create_app(corral_home, handler, clock=lambda: NOW + 0.999)
    key = load_or_create_key(corral_home, "alice")
    body = encode(CALL)
    headers = signed_headers(key, body, now=NOW + offset)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 123))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.post(COMPUTER_USE_PATH, content=body, headers=headers)

    assert response.status_code == status
    refusals = [
        e["details"]["reason"]
        for e in AuditLog(corral_home.audit_file).read()
        if e["event"] == "internal_request_refused"
    ]
    assert refusals == ([] if status == 200 else ["stale timestamp"])
    assert len(handler.calls) == (1 if status == 200 else 0)


async def test_a_replayed_nonce_is_refused_with_401_and_audited(gateway: Gateway) -> None:
    body = encode(CALL)
    headers = signed_headers(gateway.key, body)
    first = await refused(gateway, body, headers)
    assert first.status_code == 200

    assert_refused(gateway, await refused(gateway, body, headers), 401, "replayed nonce")
    assert len(gateway.handler.calls) == 1


async def test_a_body_altered_after_signing_is_refused_with_401_and_audited(
    gateway: Gateway,
) -> None:
    body = encode(CALL)
    headers = signed_headers(gateway.key, body)
    altered = encode({**CALL, "arguments": {"x": 999, "y": 20}})

    assert_refused(gateway, await refused(gateway, altered, headers), 401, "bad signature")
    assert gateway.handler.calls == []


async def test_a_malformed_nonce_is_refused_with_401_and_audited(gateway: Gateway) -> None:
    body = encode(CALL)
    headers = signed_headers(gateway.key, body)
    headers[HEADER_NONCE] = "not-hex"

    assert_refused(gateway, await refused(gateway, body, headers), 401, "malformed nonce")


async def test_a_malformed_timestamp_is_refused_with_401_and_audited(gateway: Gateway) -> None:
    body = encode(CALL)
    headers = signed_headers(gateway.key, body)
    headers[HEADER_TIMESTAMP] = "yesterday"

    assert_refused(gateway, await refused(gateway, body, headers), 401, "malformed timestamp")


# --------------------------------------------------------------- refused: 400 / 413
@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({**CALL, "tool": "execute_program"}, "tool"),
        ({**CALL, "arguments": [1, 2]}, "arguments"),
        ({"agent": "alice", "tool": "computer_click"}, "arguments"),
        ({**CALL, "extra": 1}, "extra"),
    ],
)
async def test_a_signed_but_invalid_body_is_refused_with_400_and_audited(
    gateway: Gateway, payload: dict[str, Any], where: str
) -> None:
    body = encode(payload)
    response = await refused(gateway, body, signed_headers(gateway.key, body))

    assert response.status_code == 400, response.text
    reason = response.json()["error"]
    assert reason.startswith("invalid body: ")
    assert where in reason
    assert gateway.refusals()[-1]["reason"] == reason
    assert gateway.handler.calls == []


@pytest.mark.parametrize(
    "body",
    [b"\xff not json", b"[1]", encode({**CALL, "agent": "Alice"}), encode({**CALL, "agent": 7})],
)
async def test_a_signed_body_that_names_no_agent_with_a_key_is_refused_with_401(
    gateway: Gateway, body: bytes
) -> None:
    response = await refused(gateway, body, signed_headers(gateway.key, body))

    assert_refused(gateway, response, 401, "no channel key for the agent the body names")
    assert gateway.handler.calls == []


# --------------------------------------------------------------- one key per agent
async def test_an_agents_key_cannot_call_as_another_agent(gateway: Gateway) -> None:
    load_or_create_key(gateway.home, "bob")  # bob has a key, but alice's signs this
    body = encode({**CALL, "agent": "bob"})

    response = await refused(gateway, body, signed_headers(gateway.key, body))

    assert_refused(gateway, response, 401, "bad signature")
    assert gateway.handler.calls == []


async def test_an_agent_with_no_key_yet_is_refused_and_gets_none(gateway: Gateway) -> None:
    body = encode({**CALL, "agent": "carol"})

    response = await refused(gateway, body, signed_headers(gateway.key, body))

    assert_refused(gateway, response, 401, "no channel key for the agent the body names")
    assert not (gateway.home.root / "channel" / "carol.key").exists()


async def test_a_second_agent_field_cannot_swap_the_agent_after_the_key_is_picked(
    gateway: Gateway,
) -> None:
    bob = load_or_create_key(gateway.home, "bob")
    body = b'{"agent":"bob","agent":"alice","tool":"computer_click","arguments":{}}'

    # The key is picked by the agent the body model will see (the last one): bob's key
    # does not sign it, and alice's runs the call as alice.
    response = await refused(gateway, body, signed_headers(bob, body))
    assert_refused(gateway, response, 401, "bad signature")
    response = await refused(gateway, body, signed_headers(gateway.key, body))
    assert response.status_code == 200, response.text
    assert gateway.handler.calls == [("alice", "computer_click", {})]


async def test_each_agents_own_key_works_for_it(gateway: Gateway) -> None:
    bob = load_or_create_key(gateway.home, "bob")
    body = encode({**CALL, "agent": "bob"})

    response = await refused(gateway, body, signed_headers(bob, body))

    assert response.status_code == 200, response.text
    assert [agent for agent, _, _ in gateway.handler.calls] == ["bob"]


async def test_a_body_over_1_mib_is_refused_with_413_and_audited(gateway: Gateway) -> None:
    body = encode({**CALL, "arguments": {"pad": "x" * (1024 * 1024)}})
    headers = signed_headers(gateway.key, body)

    assert_refused(gateway, await refused(gateway, body, headers), 413, "body larger than 1 MiB")
    assert gateway.handler.calls == []


# --------------------------------------------------------------- refused: 403
async def test_a_non_loopback_peer_is_refused_before_its_body_is_read(
    corral_home: CorralHome,
) -> None:
    handler = Recorder()
    app = create_app(corral_home, handler)
    sent: list[Message] = []

    async def receive() -> Message:
        raise AssertionError("the gateway read the body of a non-loopback peer")

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": COMPUTER_USE_PATH,
        "raw_path": COMPUTER_USE_PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-length", b"1000000")],
        "client": ("203.0.113.9", 40000),
        "server": ("127.0.0.1", 9030),
    }
    await app(scope, receive, send)

    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 403
    assert handler.calls == []


@pytest.mark.parametrize("peer", ["::1", "127.0.0.2", "::ffff:127.0.0.1"])
async def test_every_loopback_address_is_a_loopback_peer(
    corral_home: CorralHome, peer: str
) -> None:
    app = create_app(corral_home, Recorder())
    transport = httpx.ASGITransport(app=app, client=(peer, 123))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.post(COMPUTER_USE_PATH, content=b"{}")

    assert response.status_code == 401


# --------------------------------------------------------------- fuzz
@pytest.fixture
def fuzz_app(corral_home: CorralHome) -> tuple[Starlette, bytes]:
    return create_app(corral_home, Recorder()), load_or_create_key(corral_home, "alice")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
_calls = st.fixed_dictionaries(
    {
        "agent": st.sampled_from(["alice", "bob-2", "Alice", "", "a" * 80, "alice\n"]),
        "tool": st.sampled_from(
            ["computer_click", "computer_screenshot", "computer_", "execute_program", "computer_X"]
        ),
        "arguments": st.dictionaries(st.text(max_size=8), _json, max_size=4) | _json,
    },
    optional={"extra": _json},
)
_valid_calls = st.fixed_dictionaries(
    {
        "agent": st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True),
        "tool": st.from_regex(r"computer_[a-z_]{1,12}", fullmatch=True),
        "arguments": st.dictionaries(st.text(max_size=8), _json, max_size=4),
    }
)
_bodies = (
    st.binary(max_size=300) | _json.map(encode) | _calls.map(encode) | _valid_calls.map(encode)
)
_ascii = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=70)
_header_names = st.sampled_from(
    [HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE, "content-type", "x-corral-nonce"]
) | st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,20}", fullmatch=True).filter(
    lambda name: name.lower() not in {"content-length", "transfer-encoding", "host"}
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    method=st.sampled_from(["POST"] * 8 + ["GET", "PUT"]),
    path=st.sampled_from([COMPUTER_USE_PATH] * 8 + ["/api/internal/x", "/healthz"]),
    body=_bodies,
    headers=st.dictionaries(_header_names, _ascii, max_size=5),
    mode=st.sampled_from(["raw", "signed", "signed-then-tampered"]),
)
async def test_random_requests_never_make_the_gateway_fail(
    fuzz_app: tuple[Starlette, bytes],
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    mode: str,
) -> None:
    app, key = fuzz_app
    if mode != "raw":
        headers = {**headers, **sign(key, method, path, body, now=time.time(), nonce=new_nonce())}
    if mode == "signed-then-tampered":
        body = body + b" "
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 123))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        response = await client.request(method, path, content=body, headers=headers)

    event(f"HTTP {response.status_code}")
    assert response.status_code < 500, response.text


# --------------------------------------------------------------- forwarder
async def test_the_forwarder_says_the_gateway_is_not_running_when_nothing_listens(
    corral_home: CorralHome, free_tcp_port: int
) -> None:
    url = gateway_base_url("127.0.0.1", free_tcp_port)

    result = await forward(corral_home, url, "alice", "computer_screenshot", {})

    assert result.is_error is True
    assert len(result.content) == 1
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == (
        f"corral gateway is not running at {url}; start it with `corral gateway`"
    )
    assert result.content[0].text == not_running_message(url)


async def test_the_forwarder_maps_text_and_image_blocks_and_structured_content(
    gateway: Gateway,
) -> None:
    gateway.handler.answer = answer(
        image_block(base64.b64decode(TINY_PNG)),
        text_block("3 of 50 actions used; 14 min left"),
        actions_used=3,
    )

    result = await forward(gateway.home, gateway.url, "alice", "computer_screenshot", {})

    assert gateway.handler.calls == [("alice", "computer_screenshot", {})]
    assert result.is_error is False
    image, text = result.content
    assert isinstance(image, types.ImageContent)
    assert image.data == TINY_PNG
    assert image.mime_type == "image/png"
    assert isinstance(text, types.TextContent)
    assert text.text == "3 of 50 actions used; 14 min left"
    assert result.structured_content == {"actions_used": 3}
    wire = result.model_dump(by_alias=True, exclude_none=True)
    assert wire["content"][0] == {"type": "image", "data": TINY_PNG, "mimeType": "image/png"}


async def test_the_forwarder_keeps_one_connection_for_call_after_call(gateway: Gateway) -> None:
    """Each answer is read to its end, so its connection goes back to the pool and the next
    call reuses it (a connection per call cost a TCP connect, issue 23 item 9); the
    progress lines before a result change nothing."""
    gateway.handler.progress = [("working", "on it")]
    async with gateway_client() as client:
        for _ in range(3):
            result = await forward(
                gateway.home, gateway.url, "alice", "computer_screenshot", {}, client=client
            )
            assert result.is_error is False
        assert client.opened == 1
        assert client.idle(gateway.url) == 1
    assert len(gateway.handler.calls) == 3


async def test_the_forwarder_passes_the_arguments_and_the_gateways_error_flag(
    gateway: Gateway,
) -> None:
    gateway.handler.answer = error("no session: call computer_session_start")
    arguments = {"x": 5, "y": 7, "button": "left", "double": False, "note": "héllo ✓"}

    result = await forward(gateway.home, gateway.url, "alice", "computer_click", arguments)

    assert gateway.handler.calls == [("alice", "computer_click", arguments)]
    assert result.is_error is True
    assert result.structured_content is None
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "no session: call computer_session_start"


async def test_the_forwarder_reports_a_refusal_when_the_keys_differ(
    gateway: Gateway, tmp_path: Path
) -> None:
    other_home = CorralHome(root=tmp_path / "other-home")

    result = await forward(other_home, gateway.url, "alice", "computer_screenshot", {})

    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "corral gateway refused the request: bad signature"
    assert gateway.handler.calls == []


async def test_the_forwarder_reports_a_body_the_gateway_refused(gateway: Gateway) -> None:
    result = await forward(gateway.home, gateway.url, "alice", "execute_program", {})

    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text.startswith(
        "corral gateway could not run execute_program (HTTP 400): invalid body: tool"
    )


async def test_the_forwarder_signs_nothing_for_a_name_that_is_not_an_agents(
    gateway: Gateway,
) -> None:
    result = await forward(gateway.home, gateway.url, "Not-An-Agent", "computer_screenshot", {})

    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    assert "cannot sign the request" in result.content[0].text
    assert gateway.handler.calls == []


async def test_the_forwarder_reports_a_gateway_handler_failure_without_internals(
    gateway: Gateway,
) -> None:
    gateway.handler.answer = Answer((Image(b"", mime_type="not a media type"),))

    result = await forward(gateway.home, gateway.url, "alice", "computer_screenshot", {})

    assert result.is_error is True
    assert isinstance(result.content[0], types.TextContent)
    text = result.content[0].text
    # The forwarder asks for the streamed answer: the failure is its last line, not a 500.
    assert text.startswith("corral gateway could not run computer_screenshot: ")
    assert "internal error in the gateway (incident " in text
    assert "not a list" not in text


@pytest.mark.parametrize(
    "header",
    [
        {"X-Forwarded-For": "203.0.113.66"},
        {"X-Real-IP": "203.0.113.66"},
        {"Forwarded": "for=203.0.113.66"},
    ],
)
async def test_a_forged_forwarding_header_never_changes_the_audited_peer(
    gateway: Gateway, header: dict[str, str]
) -> None:
    response = await refused(gateway, encode(CALL), {"Content-Type": "application/json", **header})

    assert response.status_code == 401
    [refusal] = gateway.refusals()
    assert refusal["peer"] == "127.0.0.1"
