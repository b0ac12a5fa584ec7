"""The operators' API (orchestrator/gateway/admin_api.py) in process: only an operator's
token reaches it, an agent's channel key does not, and whatever is decided is audited
under the token's operator. A held click on the in-memory kiosk is the thing at stake:
each refused attempt leaves it pending. The same on real processes:
tests/e2e/test_operator_credentials.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from orchestrator.audit import AuditLog
from orchestrator.gateway.admin_api import admin_routes, bearer_token
from orchestrator.gateway.app import create_app
from orchestrator.gateway.signing import load_or_create_key, new_nonce, sign
from orchestrator.gateway.wire import ADMIN_DECIDE_PATH, ADMIN_SESSION_ACT_PATH
from orchestrator.home import CorralHome
from orchestrator.people.operators import add_operator, remove_operator
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.kiosk.sessions import SessionManager
from tests.fakes import InMemoryBackend
from tests.gateway_helpers import Recorder
from tests.unit.test_oversight import started
from tests.unit.test_session_rules import call, write_agent

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@pytest.fixture
async def admin(manager: SessionManager) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(manager.home, Recorder(), extra_routes=admin_routes(manager.oversight))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 123))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


def refusals(home: CorralHome) -> list[str]:
    return [
        e["details"]["reason"]
        for e in AuditLog(home.audit_file).read()
        if e["event"] == "internal_request_refused"
    ]


async def post(
    admin: httpx.AsyncClient, path: str, payload: dict[str, Any], headers: dict[str, str]
) -> httpx.Response:
    return await admin.post(path, content=json.dumps(payload).encode(), headers=headers)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


async def test_only_an_operators_token_decides_and_the_audit_names_its_operator(
    corral_home: CorralHome,
    manager: SessionManager,
    backend: InMemoryBackend,
    admin: httpx.AsyncClient,
) -> None:
    write_agent(corral_home)
    kiosk = await started(manager, backend)
    olga = add_operator(corral_home, "olga")
    pete = add_operator(corral_home, "pete")
    remove_operator(corral_home, "pete")
    answers: list[Answer] = []

    async def click() -> None:
        answers.append(await call(manager, "computer_click", x=10, y=10))

    async with anyio.create_task_group() as tg:
        tg.start_soon(click)
        with anyio.fail_after(5):
            while not manager.approvals.pending():
                await anyio.wait_all_tasks_blocked()
        (held,) = manager.approvals.pending()
        ask = {"id": held.id, "decision": "approve", "reason": ""}
        body = json.dumps(ask).encode()
        key = load_or_create_key(corral_home, "alice")  # what alice's `corral mcp` holds
        signed = sign(key, "POST", ADMIN_DECIDE_PATH, body, now=0, nonce=new_nonce())
        attempts = [
            ({"Content-Type": "application/json"}, "no operator token"),
            ({**signed, "Content-Type": "application/json"}, "no operator token"),
            (bearer(key.hex()), "not an operator's token"),
            (bearer("crl_op_made-up"), "not an operator's token"),
            (bearer(pete), "not an operator's token"),  # removed: its token is dead
            ({"Authorization": f"Basic {olga}"}, "no operator token"),
        ]
        for headers, why in attempts:
            response = await post(admin, ADMIN_DECIDE_PATH, ask, headers)
            assert response.status_code == 401, response.text
            assert response.json()["error"].startswith(why)
            assert manager.approvals.pending() == [held]  # still waiting
        assert not [r for r in kiosk.requests if r["op"] == "click"]

        response = await post(
            admin, ADMIN_DECIDE_PATH, {**ask, "operator": "mallory"}, bearer(olga)
        )
        assert response.status_code == 400  # no name in the body: the token says who
        response = await post(admin, ADMIN_DECIDE_PATH, ask, bearer(olga))
        assert response.status_code == 200, response.text
    assert not answers[0].is_error
    assert [r for r in kiosk.requests if r["op"] == "click"]
    assert len(refusals(corral_home)) == len(attempts)
    (decided,) = [
        e for e in AuditLog(corral_home.audit_file).read() if e["event"] == "approval_decided"
    ]
    assert decided["details"]["operator"] == "olga"


async def test_an_agents_key_cannot_take_over_or_hand_back(
    corral_home: CorralHome,
    manager: SessionManager,
    backend: InMemoryBackend,
    admin: httpx.AsyncClient,
) -> None:
    write_agent(corral_home, confirm_words=[])
    await started(manager, backend)
    key = load_or_create_key(corral_home, "alice")
    olga = add_operator(corral_home, "olga")
    for action in ("takeover", "handback", "stop"):
        ask = {"agent": "alice", "action": action}
        body = json.dumps(ask).encode()
        signed = sign(key, "POST", ADMIN_SESSION_ACT_PATH, body, now=0, nonce=new_nonce())
        response = await post(admin, ADMIN_SESSION_ACT_PATH, ask, signed)
        assert response.status_code == 401
        assert manager.sessions["alice"].controller == "ai"

    ask = {"agent": "alice", "action": "takeover"}
    assert (await post(admin, ADMIN_SESSION_ACT_PATH, ask, bearer(olga))).status_code == 200
    assert manager.sessions["alice"].holder == "olga"
    (taken,) = [e for e in AuditLog(corral_home.audit_file).read() if e["event"] == "takeover"]
    assert taken["details"]["operator"] == "olga"


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic abc", None),
        ("Bearer crl_op_x", "crl_op_x"),
        ("bearer  crl_op_x ", "crl_op_x"),
    ],
)
def test_the_bearer_header_is_read_strictly(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token
