"""A machine per conversation (issue 25 item 1), end to end: two stdio clients of one
agent (two `corral mcp` processes, as two editor windows would be) get two browser rigs
that cannot see each other's pages; each lists its own rig and counts the other's; a
client that closes has its rig removed at once, and one that is killed (SIGKILL: no word
to the gateway) within 10 s. Real containers, the test's own HTTPS site."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import anyio
import docker
import pytest

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, wait_until
from tests.e2e.test_browser_use import SITE, fenced, rigs_of, use
from tests.e2e.test_browser_use import gateway as gateway
from tests.e2e.test_browser_use import rig_sites as rig_sites
from tests.e2e.test_computer_use import text_of
from tests.helpers import children_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WITHIN = 10.0  # the promise: a conversation's rigs are removed this soon after it ends


def my_mcp_servers() -> set[int]:
    """The `corral mcp` processes this test process started (its children)."""
    return {
        child for child, argv in children_of(os.getpid()) if b"mcp" in argv and b"--agent" in argv
    }


async def test_two_conversations_get_two_browsers_and_each_ends_with_its_client(
    gateway: CorralHome, docker_client: docker.DockerClient
) -> None:
    async with connect(gateway, "stdio") as first:
        before = my_mcp_servers()
        client = connect(gateway, "stdio")
        second = await client.__aenter__()
        try:
            (second_pid,) = my_mcp_servers() - before
            one = await use(first, "navigate", url=f"https://{SITE}/")
            two = await use(second, "navigate", url=f"https://{SITE}/two")
            assert not one.is_error and not two.is_error, (text_of(one), text_of(two))
            assert len(rigs_of(docker_client, "alice")) == 2

            # each sees its own page only: the other's navigation did not move it
            assert "Page two" not in fenced(await use(first, "extract", mode="text"))
            assert "Page two" in fenced(await use(second, "extract", mode="text"))
            listed = (await first.client.call_tool("rig_list", {})).structured_content
            assert listed is not None and len(listed["rigs"]) == 1 and listed["others"] == 1
        finally:
            os.kill(second_pid, signal.SIGKILL)  # the second client's server dies unheard
            killed_at = anyio.current_time()
            with contextlib.suppress(Exception):  # its client finds its server gone
                await client.__aexit__(None, None, None)
        await wait_until(lambda: len(rigs_of(docker_client, "alice")) == 1, limit=WITHIN)
        assert anyio.current_time() - killed_at < WITHIN
        again = await use(first, "extract", mode="text")  # the first goes on
        assert not again.is_error and "Page two" not in fenced(again), text_of(again)
    # the first client closed: its conversation ended, its rig goes at once
    await wait_until(lambda: rigs_of(docker_client, "alice") == [], limit=WITHIN)


async def test_an_http_session_that_ends_takes_its_rig_with_it(tmp_path: Path) -> None:
    """Over Streamable HTTP each session is a conversation: two sessions of one server get
    a phone each (the fake adbd, two devices: tests/simulators); the one whose client
    leaves (the SDK deletes its session) loses its rig at once, the other keeps its own."""
    from tests.e2e.conftest import serve_http
    from tests.e2e.gateways import running_gateway
    from tests.e2e.test_resource_links import http_session
    from tests.e2e.test_rules_everywhere import write
    from tests.images import ENV
    from tests.simulators.fake_adbd import FakeAdbd

    home = CorralHome(root=tmp_path / "corral-home", env=ENV)
    home.ensure()
    write(home, "alice", mobile_use=True)
    key = {"verb": "key", "key": "BACK"}
    with FakeAdbd() as one, FakeAdbd() as two:
        devices = f'"127.0.0.1:{one.port}", "127.0.0.1:{two.port}"'
        async with (
            running_gateway(home, f"[rigs.android]\ndevices = [{devices}]\n"),
            serve_http(home) as (url, _),
            http_session(url, home) as first,
        ):
            async with http_session(url, home) as second:
                for client in (first, second):
                    done = await client.call_tool("mobile_use", key)
                    assert not done.is_error, text_of(done)
                listed = (await first.call_tool("rig_list", {})).structured_content
                assert listed is not None and listed["others"] == 1

            async def only_mine() -> bool:
                listed = (await first.call_tool("rig_list", {})).structured_content
                return listed is not None and listed["others"] == 0 and len(listed["rigs"]) == 1

            await wait_until(only_mine, limit=WITHIN)
            assert not (await first.call_tool("mobile_use", key)).is_error
