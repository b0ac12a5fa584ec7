"""The INPUT rule fails closed (SPEC S2.6): no rule that cannot be added is skipped while
the traffic it would stop can flow. The tools are replaced by recorders here; the real
rules on a real bridge: tests/integration/test_egress.py
(test_the_input_rule_is_what_closes_the_host)."""

from __future__ import annotations

import pytest

from orchestrator.backends.docker import firewall
from orchestrator.errors import EgressError

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    calls: list[tuple[str, ...]] = []

    async def run_tool(tool: str, *args: str) -> tuple[int, str]:
        calls.append((tool, *args))
        return 0, ""

    monkeypatch.setattr(firewall, "_run_tool", run_tool)
    return calls


async def test_missing_ip6tables_with_ipv6_on_refuses_before_any_rule(
    monkeypatch: pytest.MonkeyPatch, ran: list[tuple[str, ...]]
) -> None:
    monkeypatch.setattr(firewall, "firewall_tools", lambda: ["iptables"])
    monkeypatch.setattr(firewall, "_ipv6_enabled", lambda: True)

    with pytest.raises(EgressError, match="ip6tables is not installed but IPv6 is on"):
        await firewall.add_input_drop("crltest")
    assert ran == []


async def test_missing_ip6tables_with_ipv6_off_adds_the_ipv4_rule(
    monkeypatch: pytest.MonkeyPatch, ran: list[tuple[str, ...]]
) -> None:
    monkeypatch.setattr(firewall, "firewall_tools", lambda: ["iptables"])
    monkeypatch.setattr(firewall, "_ipv6_enabled", lambda: False)

    await firewall.add_input_drop("crltest")

    assert ran == [("iptables", "-I", *firewall.input_drop_rule("crltest"))]


async def test_missing_iptables_refuses(
    monkeypatch: pytest.MonkeyPatch, ran: list[tuple[str, ...]]
) -> None:
    monkeypatch.setattr(firewall, "firewall_tools", lambda: ["ip6tables"])

    with pytest.raises(EgressError, match="iptables is not installed"):
        await firewall.add_input_drop("crltest")
    assert ran == []


async def test_an_ip6tables_refusal_with_ipv6_on_fails_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run_tool(tool: str, *args: str) -> tuple[int, str]:
        return (1, "no such table") if tool == "ip6tables" else (0, "")

    monkeypatch.setattr(firewall, "_run_tool", run_tool)
    monkeypatch.setattr(firewall, "firewall_tools", lambda: ["iptables", "ip6tables"])
    monkeypatch.setattr(firewall, "_ipv6_enabled", lambda: True)

    with pytest.raises(EgressError, match="ip6tables could not add the INPUT rule"):
        await firewall.add_input_drop("crltest")
