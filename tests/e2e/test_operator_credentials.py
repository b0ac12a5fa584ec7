"""Operator credentials, tried as an attacker would (issue 22 item 5), on real processes:
a real `corral gateway`, a real `corral mcp` over stdio, real kiosk containers.

The thing at stake is a held navigation of agent olive. Whatever olive's `corral mcp`
holds (its channel key, CORRAL_HOME/channel/olive.key) cannot approve it, take the
desktop or hand it back; nor can a made-up operator token; and olive's key cannot call
as agent bob. Each attack is judged by its effect: the approval is still pending, the
session still the AI's, bob has no session, and the refusal is in the audit. Then the
right operator's token approves it and the audit names that operator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from orchestrator.gateway.signing import key_path, load_or_create_key, new_nonce, sign
from orchestrator.gateway.wire import (
    ADMIN_DECIDE_PATH,
    ADMIN_SESSION_ACT_PATH,
    COMPUTER_USE_PATH,
)
from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, free_port, wait_until
from tests.e2e.gateways import operator_env
from tests.e2e.test_computer_use import (
    RED,
    SITE,
    World,
    call,
    screen_until,
    sites,  # noqa: F401 (the module-scoped site containers, shared by name)
    text_of,
    write_agent,
)
from tests.e2e.test_operators import audit, corral, gateway_port, kiosk_gateway, pending
from tests.helpers import env_with_home

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

APPROVAL_SECONDS = 300  # far beyond the test: the approval must not expire under it
NO_TOKEN = "no operator token (set CORRAL_OPERATOR_TOKEN or pass --token-file)"


@pytest.fixture
async def world(corral_home: CorralHome, sites: tuple[str, str, str]) -> AsyncIterator[World]:  # noqa: F811
    async with kiosk_gateway(corral_home, sites, APPROVAL_SECONDS) as running:
        yield running


def signed_post(home: CorralHome, key: bytes, path: str, payload: dict[str, Any]) -> int:
    """POST `payload` to the gateway, signed with `key` as `corral mcp` signs; the status."""
    body = json.dumps(payload).encode()
    headers = sign(key, "POST", path, body, now=time.time(), nonce=new_nonce())
    headers["Content-Type"] = "application/json"
    url = f"http://127.0.0.1:{gateway_port(home)}{path}"
    return httpx.post(url, content=body, headers=headers, trust_env=False, timeout=30).status_code


def refusals(home: CorralHome) -> list[dict[str, Any]]:
    return [e["details"] for e in audit(home, "internal_request_refused")]


def state_of(home: CorralHome, agent: str) -> str | None:
    listed = json.loads(corral(home, "sessions", "list", "--json").stdout)
    return next((s["state"] for s in listed if s["agent"] == agent), None)


async def test_only_an_operators_token_decides_what_an_agent_waits_for(
    world: World,
    tmp_path: Any,
) -> None:
    home = world.home
    login = f"https://{SITE}/login"
    write_agent(home, "olive", allowed_domains=[SITE], confirm_urls=[login], confirm_words=[])
    write_agent(home, "bob", allowed_domains=[SITE], confirm_words=[])
    load_or_create_key(home, "bob")  # bob's `corral mcp` has run: bob has a key
    async with connect(home, "stdio", agent="olive") as mcp:
        assert not (await call(mcp, "computer_session_start")).is_error
        olive_key = bytes.fromhex(key_path(home, "olive").read_text())
        results: list[Any] = []

        async def navigate() -> None:
            results.append(await call(mcp, "computer_navigate", url=login))

        async with anyio.create_task_group() as tg:
            tg.start_soon(navigate)
            (held,) = await wait_until(lambda: pending(home), limit=30)
            assert held["agent"] == "olive"
            assert state_of(home, "olive") == "waiting approval"  # the AI's seat, held

            def still_pending() -> None:
                assert [a["id"] for a in pending(home)] == [held["id"]]
                assert state_of(home, "olive") == "waiting approval"  # nobody took it
                assert not results, "the held navigation must still wait"

            # (a) olive's channel key on the admin API: approve, take over, hand back.
            seen = len(refusals(home))
            decide = {"id": held["id"], "decision": "approve", "reason": ""}
            assert signed_post(home, olive_key, ADMIN_DECIDE_PATH, decide) == 401
            for action in ("takeover", "handback", "stop"):
                act = {"agent": "olive", "action": action}
                assert signed_post(home, olive_key, ADMIN_SESSION_ACT_PATH, act) == 401
            still_pending()
            # ... and the key as if it were a token, from the CLI and from a token file.
            as_token = {**env_with_home(home), "CORRAL_OPERATOR_TOKEN": olive_key.hex()}
            done = corral(home, "approvals", "approve", held["id"], env=as_token)
            assert done.returncode == 1 and "not an operator's token" in done.stderr
            done = corral(home, "approvals", "approve", held["id"], operator=None)
            assert done.returncode == 2 and "CORRAL_OPERATOR_TOKEN" in done.stderr
            still_pending()

            # (c) a made-up operator token, and one for an operator of another home.
            made_up = tmp_path / "made-up.token"
            made_up.write_text("crl_op_" + "A" * 43 + "\n")
            made_up.chmod(0o600)
            no_token = env_with_home(home)
            done = corral(
                home, "sessions", "takeover", "olive", "--token-file", str(made_up), env=no_token
            )
            assert done.returncode == 1 and "not an operator's token" in done.stderr
            still_pending()
            reasons = [r["reason"] for r in refusals(home)[seen:]]
            assert reasons.count(NO_TOKEN) == 4
            assert sum(r.startswith("not an operator's token") for r in reasons) == 2
            assert {r["path"] for r in refusals(home)[seen:]} == {
                ADMIN_DECIDE_PATH,
                ADMIN_SESSION_ACT_PATH,
            }

            # (b) olive's key calling as bob: refused, and bob gets no session.
            as_bob = {"agent": "bob", "tool": "computer_session_start", "arguments": {}}
            assert signed_post(home, olive_key, COMPUTER_USE_PATH, as_bob) == 401
            assert state_of(home, "bob") is None
            lines = map(json.loads, home.audit_file.read_text().splitlines())
            assert not [e for e in lines if e["agent"] == "bob"]
            assert refusals(home)[-1]["reason"] == "bad signature"
            still_pending()

            # (d) the right operator's token, from a token file: approved, audited as olga.
            olga = tmp_path / "olga.token"
            olga.write_text(operator_env(home, "olga")["CORRAL_OPERATOR_TOKEN"])
            olga.chmod(0o644)
            approve = ("approvals", "approve", held["id"], "--token-file", str(olga))
            done = corral(home, *approve, env=no_token)
            assert done.returncode == 2 and "chmod 600" in done.stderr  # a loose file: refused
            still_pending()
            olga.chmod(0o600)
            done = corral(home, *approve, env=no_token)
            assert done.returncode == 0, done.stderr

        (answer,) = results
        assert not answer.is_error, text_of(answer)
        await screen_until(mcp, lambda r, img: img.getpixel((50, 50)) == RED)
        await call(mcp, "computer_session_stop")

    (decision,) = [e["details"] for e in audit(home, "approval_decided")]
    assert decision["decision"] == "approved" and decision["operator"] == "olga"
    assert not audit(home, "takeover") and not audit(home, "handback")


FAKE_GATEWAY = """
import http.server, sys
class Collect(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        with open(sys.argv[2], "a") as seen:
            seen.write(self.headers.get("Authorization", "") + "\\n")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Collect)
print("ready", flush=True)
server.serve_forever()
"""
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


@pytest.mark.skipif(
    os.getuid() != 0 or SYSTEM_PYTHON is None,
    reason="needs root (to run a server as another user) and /usr/bin/python3",
)
async def test_the_cli_never_sends_the_token_to_another_users_server_on_the_port(
    corral_home: CorralHome, tmp_path: Path
) -> None:
    """While the gateway is down, another local user (uid 65534) listens on its port to
    collect tokens: the CLI refuses to send, and the server saw no request."""
    port = free_port()
    corral_home.config_file.write_text(f"[gateway]\nport = {port}\n")
    seen = tmp_path / "seen"
    seen.touch()
    seen.chmod(0o666)
    tmp_path.chmod(0o755)
    argv = [str(SYSTEM_PYTHON), "-I", "-c", FAKE_GATEWAY, str(port), str(seen)]
    with subprocess.Popen(argv, user=65534, cwd="/", stdout=subprocess.PIPE, text=True) as fake:
        try:
            assert fake.stdout is not None and fake.stdout.readline().strip() == "ready"
            done = corral(corral_home, "approvals", "list")
            assert done.returncode == 1, done.stdout
            said = " ".join(done.stderr.split())  # rich wraps at its width
            assert "belongs to uid 65534" in said and "was not sent" in said
            assert seen.read_text() == ""
        finally:
            fake.kill()
