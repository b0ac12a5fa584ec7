"""The host firewall rule that closes a session network to this host (SPEC S2.6).

Docker's `internal=True` drops forwarding out of a session network, but the host's
own services stay reachable through the bridge's gateway and link-local addresses
(Docker filters FORWARD, not INPUT). For each session bridge `crl<id>` corral inserts

    iptables -I INPUT -i crl<id> -m conntrack --ctstate NEW -j DROP

(and the same with ip6tables) before any container is attached, and deletes it when
the session ends. Only `iptables`/`ip6tables` are run here, with `anyio.run_process`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import anyio

from orchestrator.errors import EgressError

RULE_RE = re.compile(r"^-A INPUT -i (crl[a-z0-9]{1,12}) -m conntrack --ctstate NEW -j DROP$")


def input_drop_rule(bridge: str) -> list[str]:
    """The rule (without the action flag) that drops new connections from `bridge` to the host."""
    return ["INPUT", "-i", bridge, "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"]


def firewall_tools() -> list[str]:
    return [tool for tool in ("iptables", "ip6tables") if shutil.which(tool) is not None]


def _ipv6_enabled() -> bool:
    try:
        return Path("/proc/sys/net/ipv6/conf/all/disable_ipv6").read_text().strip() == "0"
    except OSError:
        return False


async def _run_tool(tool: str, *args: str) -> tuple[int, str]:
    proc = await anyio.run_process([tool, "-w", *args], check=False)
    return proc.returncode, (proc.stderr or b"").decode(errors="replace").strip()


async def add_input_drop(bridge: str) -> None:
    """Insert the INPUT drop rule for `bridge` with iptables, and ip6tables if present.

    Fails closed: when iptables is missing or refuses, and when IPv6 is on but ip6tables
    is missing or refuses (the bridge's link-local IPv6 address would leave the host's
    services open). Only with IPv6 off is there no IPv6 rule to add."""
    tools = firewall_tools()
    if "iptables" not in tools:
        raise EgressError(
            "iptables is not installed: a kiosk session's network cannot be closed "
            "to this host (apt-get install iptables)"
        )
    if "ip6tables" not in tools and _ipv6_enabled():
        raise EgressError(
            "ip6tables is not installed but IPv6 is on: a kiosk session's network cannot be "
            "closed to this host over IPv6 (apt-get install iptables, which ships ip6tables, "
            "or turn IPv6 off with sysctl net.ipv6.conf.all.disable_ipv6=1)"
        )
    for tool in tools:
        code, err = await _run_tool(tool, "-I", *input_drop_rule(bridge))
        if code != 0:
            if tool == "ip6tables" and not _ipv6_enabled():
                continue
            raise EgressError(f"{tool} could not add the INPUT rule for {bridge}: {err}")


async def remove_input_drop(bridge: str) -> int:
    """Delete every copy of the INPUT drop rule for `bridge` (idempotent); return how
    many rules this call deleted. Another remover may delete the same rule between our
    check and our delete (a session's end and another process's reaper): a delete that
    finds the rule gone is that, not a failure."""
    problems = []
    deleted = 0
    for tool in firewall_tools():
        for _ in range(16):
            code, _err = await _run_tool(tool, "-C", *input_drop_rule(bridge))
            if code != 0:
                break  # no (more) such rule
            code, err = await _run_tool(tool, "-D", *input_drop_rule(bridge))
            if code == 0:
                deleted += 1
            elif (await _run_tool(tool, "-C", *input_drop_rule(bridge)))[0] == 0:
                problems.append(f"{tool}: {err}")  # still there: a real failure
                break
    if problems:
        raise EgressError(f"could not remove the INPUT rule for {bridge}: {'; '.join(problems)}")
    return deleted


async def input_drop_bridges() -> set[str]:
    """Bridges that have a corral INPUT drop rule, in any of the firewall tools."""
    found: set[str] = set()
    for tool in firewall_tools():
        proc = await anyio.run_process([tool, "-w", "-S", "INPUT"], check=False)
        if proc.returncode != 0:
            continue
        for line in proc.stdout.decode(errors="replace").splitlines():
            match = RULE_RE.match(line.strip())
            if match:
                found.add(match.group(1))
    return found
