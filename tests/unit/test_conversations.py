"""A machine per conversation (issue 25 item 1), the parts without a machine: the front
names each MCP session's conversation and says which ended; the gateway's registry ends a
conversation the front said ended at once, and one not heard of for the lease time; the
lease route takes only what the agent's own key signed, for that agent; every call names
its conversation. The rigs themselves: tests/integration/test_android_adb.py (two
conversations, two devices) and tests/e2e/test_conversations.py (two clients, two
browsers; a killed client's rigs removed)."""

from __future__ import annotations

import json

import httpx
import pytest
from pydantic import ValidationError

from mcp_front.conversations import FrontConversations
from mcp_front.forwarder import gateway_client, lease_conversations
from mcp_front.reporting import STDIO
from orchestrator.gateway.app import create_app
from orchestrator.gateway.conversations_api import with_conversations
from orchestrator.gateway.signing import load_or_create_key
from orchestrator.gateway.wire import ComputerUseRequest, ConversationLease
from orchestrator.home import CorralHome
from orchestrator.surfaces.conversations import LEASE_SECONDS, Conversations
from tests.fakes import FakeClock
from tests.gateway_helpers import Recorder, serving_asgi

pytestmark = pytest.mark.unit

A, B = "c" + "a" * 16, "c" + "b" * 16


# ------------------------------------------------------------------ the front's side


def test_a_stdio_front_is_one_conversation() -> None:
    front = FrontConversations()
    assert front.of(STDIO) == front.of(STDIO) == front.own
    assert front.lease(None) == ([front.own], [])


def test_each_http_session_is_a_conversation_and_one_that_closed_is_said_ended_once() -> None:
    front = FrontConversations()
    one, two = front.of("session-1"), front.of("session-2")
    assert len({one, two, front.own}) == 3
    assert front.of("") == front.own  # no session (2026-07-28): the process's own

    live, ended = front.lease({"session-1", "session-2"})
    assert set(live) == {front.own, one, two} and ended == []
    live, ended = front.lease({"session-1"})
    assert set(live) == {front.own, one} and ended == [two]
    assert front.lease({"session-1"})[1] == []  # said once


def test_conversation_ids_are_what_the_gateway_takes() -> None:
    front = FrontConversations()
    ComputerUseRequest(agent="alice", tool="rig_list", arguments={}, conversation=front.own)
    with pytest.raises(ValidationError):
        ComputerUseRequest(agent="alice", tool="rig_list", arguments={}, conversation="c1; x")
    with pytest.raises(ValidationError):
        ConversationLease(agent="alice", live=["../../etc"])


# ------------------------------------------------------------------ the gateway's side


def test_a_conversation_the_front_said_ended_is_over_at_once() -> None:
    clock = FakeClock()
    talks = Conversations(clock=clock)
    talks.lease("alice", [A, B], [])
    assert talks.gone("alice", A) is None

    talks.lease("alice", [B], [A])

    assert talks.gone("alice", A) == "its conversation ended"
    assert talks.gone("alice", B) is None
    talks.touch("alice", A)  # a late call of an ended conversation does not revive it
    assert talks.gone("alice", A) == "its conversation ended"


def test_a_conversation_not_heard_of_for_the_lease_time_is_over() -> None:
    clock = FakeClock()
    talks = Conversations(clock=clock)
    talks.touch("alice", A)

    clock.now += LEASE_SECONDS - 0.5
    assert talks.gone("alice", A) is None
    clock.now += 1
    why = talks.gone("alice", A)
    assert why is not None and "client is gone" in why
    assert talks.gone("bob", A) is not None  # another agent's: never heard of


def test_no_conversation_is_never_over() -> None:
    assert Conversations().gone("alice", "") is None


# ------------------------------------------------------------------ the lease route


@pytest.mark.anyio
async def test_the_lease_route_takes_the_agents_own_signed_word(corral_home: CorralHome) -> None:
    talks = Conversations()
    app = create_app(
        corral_home, Recorder(), extra_routes=with_conversations(lambda signed: [], talks)
    )
    load_or_create_key(corral_home, "alice")
    async with serving_asgi(app) as url, gateway_client() as front:
        taken = await lease_conversations(corral_home, url, "alice", [A], [], front)
        assert taken and talks.gone("alice", A) is None

        # unsigned, or signed by nobody's key: refused, nothing taken
        body = json.dumps({"agent": "alice", "live": [], "ended": [A]}).encode()
        async with httpx.AsyncClient(base_url=url, trust_env=False) as client:
            forged = await client.post("/api/internal/conversations", content=body)
        assert forged.status_code == 401 and talks.gone("alice", A) is None

        ended = await lease_conversations(corral_home, url, "alice", [], [A], front)
        assert ended and talks.gone("alice", A) == "its conversation ended"


def test_a_second_conversations_seat_is_a_seat_name_the_operators_api_takes() -> None:
    from orchestrator.gateway.wire import AdminSessionAct

    for seat in ("alice", "alice.desktop", "alice.desktop-0a1b2c"):
        assert AdminSessionAct(agent=seat, action="takeover").agent == seat
    for bad in ("alice.desktop-", "alice.desktop-XYZ123", "alice.desktop.c1", "alice.-0a1b2c"):
        with pytest.raises(ValidationError):
            AdminSessionAct(agent=bad, action="takeover")
