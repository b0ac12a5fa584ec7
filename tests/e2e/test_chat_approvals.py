"""Approvals the chat can reach (issue 25 item 6), through the official SDK's client over
stdio: a held tap makes corral send the client one URL-mode elicitation that opens the
approval in the console; the client answering "accept" approves nothing (the approval
stays pending and the device gets no input until an operator decides); the decision
sends `notifications/elicitation/complete`. A client that declared no elicitation gets
none. The phone is the fake adbd (tests/simulators), no real device."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from orchestrator.home import CorralHome
from tests.e2e.conftest import connect
from tests.e2e.held import while_held
from tests.e2e.test_computer_use import text_of
from tests.e2e.test_long_waits import android_tap
from tests.e2e.test_long_waits import home as home
from tests.e2e.test_long_waits import phones as phones
from tests.e2e.test_operators import corral, pending
from tests.helpers import corral_bin, env_with_home
from tests.simulators.fake_adbd import FakeAdbd
from tests.simulators.fake_wda import FakeWda

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_a_held_call_sends_the_approval_page_and_the_answer_decides_nothing(
    home: CorralHome, phones: tuple[FakeAdbd, FakeWda]
) -> None:
    adbd, _ = phones
    asked: list[Any] = []
    answered = anyio.Event()
    completed: list[str] = []

    async def elicitation(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        answered.set()
        return types.ElicitResult(action="accept")  # the client's own "yes": worth nothing

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)

    server = StdioServerParameters(
        command=corral_bin(), args=["mcp", "--agent", "alice"], env=env_with_home(home)
    )
    async with Client(
        server, mode="legacy", elicitation_callback=elicitation, message_handler=on_message
    ) as client:
        name, arguments = android_tap()

        async def during(approval: dict[str, Any]) -> None:
            with anyio.fail_after(30):  # a bound: the elicitation is what is waited for
                await answered.wait()
            (url,) = [p.url for p in asked]
            assert url.endswith(f"/console/#approval-{approval['id']}"), url
            assert asked[0].mode == "url" and asked[0].elicitation_id == approval["id"]
            assert "decides nothing" in asked[0].message
            # accepted in the chat: still pending, and the device got nothing
            assert [a["id"] for a in pending(home)] == [approval["id"]]
            assert not any(e.startswith("input tap") for e in adbd.device.events)
            denied = corral(home, "approvals", "deny", approval["id"])
            assert denied.returncode == 0, denied.stderr

        result = await while_held(home, lambda: client.call_tool(name, arguments), during)

        assert result.is_error and "denied this action" in text_of(result), text_of(result)
        assert not any(e.startswith("input tap") for e in adbd.device.events)
        assert completed == [asked[0].elicitation_id]
        assert len(asked) == 1


async def test_a_client_without_elicitation_is_not_asked(
    home: CorralHome, phones: tuple[FakeAdbd, FakeWda]
) -> None:
    async with connect(home, "stdio") as mcp:
        name, arguments = android_tap()

        async def during(approval: dict[str, Any]) -> None:
            denied = corral(home, "approvals", "deny", approval["id"])
            assert denied.returncode == 0, denied.stderr

        result = await while_held(home, lambda: mcp.client.call_tool(name, arguments), during)

        assert result.is_error
        assert not any(isinstance(n, types.ElicitCompleteNotification) for n in mcp.notes)
