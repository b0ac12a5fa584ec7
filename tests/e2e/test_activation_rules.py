"""Issue 22 item 2 on a real kiosk: a key that activates the focused element (Tab then
Return onto a covered button) and a typed newline in a covered form's field are held like
a click on that button. Judged by the test site's own request log: no request reaches it
while the approval is pending, one after an approval, none after a denial."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import docker
import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, wait_until
from tests.e2e.held import while_held
from tests.e2e.test_computer_use import SITE, World, call, text_of, write_agent
from tests.e2e.test_computer_use import sites as sites
from tests.e2e.test_operators import TIMEOUT, corral, kiosk_gateway
from tests.sites import requests_seen

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
async def world(corral_home: CorralHome, sites: tuple[str, str, str]) -> AsyncIterator[World]:
    async with kiosk_gateway(corral_home, sites, TIMEOUT) as running:
        yield running


async def held(
    home: CorralHome,
    act: Callable[[], Any],
    decide: list[str],
    on_pending: Callable[[], None],
    agent: str = "kai",
) -> Any:
    """Run `act` (MCP calls); once its approval is pending, call `on_pending`, then
    decide it with the CLI; the call's result."""

    async def during(approval: dict[str, Any]) -> None:
        assert "confirm_words: pay" in approval["rule"], approval
        assert "Pay now" in approval["description"], approval
        on_pending()
        done = corral(home, "approvals", *decide, approval["id"])
        assert done.returncode == 0, done.stderr

    return await while_held(home, act, during, agent=agent, limit=TIMEOUT)


async def arrives(client: docker.DockerClient, site_ip: str, path: str) -> list[str]:
    async def seen() -> bool:
        return any(p.startswith(path) for p in requests_seen(client, site_ip))

    await wait_until(seen, limit=20)
    return requests_seen(client, site_ip)


def count(client: docker.DockerClient, site_ip: str, path: str) -> int:
    return sum(p.startswith(path) for p in requests_seen(client, site_ip))


async def open_page(mcp: Any, path: str) -> None:
    opened = await call(mcp, "computer_navigate", url=f"https://{SITE}{path}")
    assert not opened.is_error, text_of(opened)


async def test_tab_return_and_a_typed_newline_onto_a_covered_button_are_held(
    world: World, docker_client: docker.DockerClient, sites: tuple[str, str, str]
) -> None:
    home, site_ip = world.home, sites[1]
    write_agent(home, "kai", allowed_domains=[SITE], confirm_words=["pay"], confirm_urls=[])
    key_path, line_path = "/paid-by-key", "/paid-by-newline"

    def nothing_yet(path: str) -> Callable[[], None]:
        def check() -> None:
            assert count(docker_client, site_ip, path) == 0, "reached the site before approval"

        return check

    async with connect(home, "stdio", agent="kai") as mcp:
        started = await call(mcp, "computer_session_start")
        assert not started.is_error, text_of(started)

        async def tab_return() -> Any:
            assert not (await call(mcp, "computer_key", key="Tab")).is_error
            return await call(mcp, "computer_key", key="Return")

        # (a) Tab then Return onto "Pay now": held; denied → no request; approved → one.
        for decide, expected in ((["deny"], 0), (["approve"], 1)):
            await open_page(mcp, "/tabpay")
            result = await held(home, tab_return, decide, nothing_yet(key_path))
            if expected:
                assert not result.is_error, text_of(result)
                await arrives(docker_client, site_ip, key_path)
            else:
                assert result.is_error and "denied this action" in text_of(result)
            await open_page(mcp, f"/?after-{decide[0]}-key")  # a later request, as a fence
            await arrives(docker_client, site_ip, f"/?after-{decide[0]}-key")
            assert count(docker_client, site_ip, key_path) == expected

        # (b) "12\n" typed into the form's field whose submit button is covered: held.
        for decide, expected in ((["deny"], 0), (["approve"], 1)):
            await open_page(mcp, "/typepay")
            clicked = await call(mcp, "computer_click", x=250, y=320)  # the field
            assert not clicked.is_error, text_of(clicked)

            async def type_line() -> Any:
                return await call(mcp, "computer_type", text="12\n")

            result = await held(home, type_line, decide, nothing_yet(line_path))
            if expected:
                assert not result.is_error, text_of(result)
                seen = await arrives(docker_client, site_ip, line_path)
                assert f"{line_path}?amount=12" in seen
            else:
                assert result.is_error and "denied this action" in text_of(result)
            await open_page(mcp, f"/?after-{decide[0]}-line")
            await arrives(docker_client, site_ip, f"/?after-{decide[0]}-line")
            assert count(docker_client, site_ip, line_path) == expected
        await call(mcp, "computer_session_stop")
