"""The console's doors (SPEC S6.2), tried from outside against a real `corral gateway`:
no token, a wrong token, a login form without its CSRF cookie, an action without the
CSRF token, a WebSocket from another Origin or without a login: all refused; the
cookie is HttpOnly and SameSite=Strict; every page carries a CSP without inline scripts
and X-Frame-Options DENY."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator

import httpx
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from orchestrator.home import CorralHome
from tests.e2e.gateways import add_operator, running_gateway
from tests.helpers import corral_bin, env_with_home

pytestmark = [pytest.mark.anyio]


@pytest.fixture
async def gateway(corral_home: CorralHome) -> AsyncIterator[str]:
    async with running_gateway(corral_home) as (base, _):
        yield base


async def log_in(client: httpx.AsyncClient, token: str) -> httpx.Response:
    form = await client.get("/console/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    return await client.post("/console/login", data={"csrf": csrf.group(1), "token": token})


def page_csrf(html: str) -> str:
    found = re.search(r'<meta name="csrf" content="([^"]+)">', html)
    assert found is not None
    return found.group(1)


async def test_no_token_or_a_wrong_one_gets_nothing(gateway: str, corral_home: CorralHome) -> None:
    token = add_operator(corral_home, "olga")
    async with httpx.AsyncClient(base_url=gateway) as client:
        for path in ("/console/", "/console/sessions/alice"):
            response = await client.get(path)
            assert response.status_code == 303 and response.headers["location"] == "/console/login"
        assert (await client.get("/console/api/state")).status_code == 401
        wrong = await log_in(client, token[:-2] + "xx")
        assert wrong.status_code == 303 and "failed=1" in wrong.headers["location"]
        assert "corral_console" not in client.cookies
        # The login form without its double-submit cookie is refused.
        async with httpx.AsyncClient(base_url=gateway) as bare:
            forged = await bare.post("/console/login", data={"csrf": "x", "token": token})
            assert forged.status_code == 403


async def test_a_login_gets_a_strict_httponly_cookie_and_posts_need_csrf(
    gateway: str, corral_home: CorralHome
) -> None:
    token = add_operator(corral_home, "olga")
    async with httpx.AsyncClient(base_url=gateway) as client:
        ok = await log_in(client, token)
        assert ok.status_code == 303 and ok.headers["location"] == "/console/"
        cookie = next(
            v for k, v in ok.headers.multi_items() if k == "set-cookie" and "corral_console=" in v
        )
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
        home = await client.get("/console/")
        assert home.status_code == 200 and "olga" in home.text
        csp = home.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert home.headers["x-frame-options"] == "DENY"
        assert "<script>" not in home.text and " style=" not in home.text
        # An action without the CSRF token, or with a wrong one: refused.
        for headers in ({}, {"X-CSRF-Token": "nope"}):
            refused = await client.post("/console/act/takeover/alice", headers=headers)
            assert refused.status_code == 403
        # With it, the action is tried (alice has no session: 409, not 403).
        csrf = page_csrf(home.text)
        tried = await client.post(
            "/console/act/takeover/alice",
            headers={"X-CSRF-Token": csrf, "Accept": "application/json"},
        )
        assert tried.status_code == 409 and "no running session" in tried.json()["error"]


async def test_removing_an_operator_ends_its_login(gateway: str, corral_home: CorralHome) -> None:
    token = add_operator(corral_home, "olga")
    async with httpx.AsyncClient(base_url=gateway) as client:
        await log_in(client, token)
        assert (await client.get("/console/api/state")).status_code == 200
        subprocess.run(
            [corral_bin(), "operators", "remove", "olga"],
            env=env_with_home(corral_home),
            check=True,
            capture_output=True,
            timeout=30,
        )
        assert (await client.get("/console/api/state")).status_code == 401


async def test_the_live_view_websocket_needs_the_cookie_and_this_origin(
    gateway: str, corral_home: CorralHome
) -> None:
    token = add_operator(corral_home, "olga")
    url = gateway.replace("http://", "ws://") + "/console/sessions/alice/vnc"
    async with httpx.AsyncClient(base_url=gateway) as client:
        await log_in(client, token)
        cookie = f"corral_console={client.cookies['corral_console']}"
    attempts = {
        "no cookie": {"Origin": gateway},
        "another origin": {"Origin": "http://evil.example", "Cookie": cookie},
        "no origin": {"Cookie": cookie},
    }
    for what, headers in attempts.items():
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(url, additional_headers=headers, open_timeout=10):
                pass
        assert refused.value.response.status_code == 403, what
    lines = corral_home.audit_file.read_text()
    assert lines.count('"console_vnc_refused"') == 3


REPLAY = """
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Cookie": "corral_console=" + sys.argv[2]})
class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None
try:
    answer = urllib.request.build_opener(Stay).open(req, timeout=20)
    print(answer.status, answer.read().decode(errors="replace"))
except urllib.error.HTTPError as exc:
    print(exc.code, exc.headers.get("location"))
"""


# A Python every user may run (the test's own may sit in root's home).
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


@pytest.mark.skipif(
    os.getuid() != 0 or SYSTEM_PYTHON is None,
    reason="needs root (to run a process as another user) and /usr/bin/python3",
)
async def test_a_login_cookie_replayed_by_another_local_user_gets_nothing(
    gateway: str, corral_home: CorralHome
) -> None:
    """A browser sends the cookie to a server on any port of 127.0.0.1, so another local
    user can get it; replayed from that user's process it is no login (a real process
    as uid 65534 against the real gateway), while the owner's own request still works."""
    token = add_operator(corral_home, "olga")
    async with httpx.AsyncClient(base_url=gateway) as client:
        assert (await log_in(client, token)).status_code == 303
        stolen = client.cookies["corral_console"]

        def replay(user: int | None) -> str:
            done = subprocess.run(
                [str(SYSTEM_PYTHON), "-I", "-c", REPLAY, f"{gateway}/console/", stolen],
                user=user,
                cwd="/",
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert replay(65534).startswith("303 /console/login")
        assert replay(None).startswith("200") and "olga" in replay(None)  # the owner: served
        assert (await client.get("/console/")).status_code == 200  # and not logged out
