"""Benchmark: browser_use round trips through corral's MCP front, against Playwright MCP's
way of doing the same, measured in the same run.

Run from the repository root:

    .venv/bin/python bench/rigs.py [--runs 20] [--starts 3] [--write docs/benchmarks.md]

The real path: a throwaway CORRAL_HOME, `corral gateway` as a subprocess, `corral mcp
--agent bench-rig` over stdio (the 2.x SDK's Client), an agent with `browser_use = true`
whose allowed_domains is the heavy page's site (bench/computer_use_site.py: 50 inputs, 5
secret, 3 iframes, a shadow root), served over HTTPS by a local site container.

Measured, p50/p95/min in ms:

1. start of a browser rig to its first screenshot (`rig_close`, then `browser_use
   screenshot`), from the warm pool the gateway keeps by default (issue 23: the pool let
   settle first; the claim pins the armed proxy made with the rig's network) and cold
   (started right after a claim, while the pool waits 2 s to refill: egress, container,
   Chromium, the CDP bridge, Playwright's connect); the audit must say which was which;
2. `browser_use click` on a ref (corral answers the action alone);
3. `browser_use extract a11y` (the snapshot with refs);
4. Playwright MCP's way: every action answers with a fresh snapshot, so a click costs
   the click plus a snapshot (`click` then `extract a11y`, back to back, timed together).

Rounds are interleaved (each round runs 2, 3 and 4 once, in rotating order) after
WARMUP uncounted rounds. Every container is removed at the end (the gateway's stop, the
site's own cleanup).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from _common import BenchError, NamedTimings, latency_table, publish, run_main
from computer_use import free_port, mcp_params, running_gateway
from computer_use_paths import console
from computer_use_site import HEAVY_URL, SITE, heavy_site
from mcp import Client

from orchestrator.audit import AuditLog
from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome, Environment

AGENT = "bench-rig"
WARMUP = 3
SECTION = "rigs"


Row = NamedTimings


def prepare(home: CorralHome, port: int, ca_file: Path, ip: str) -> None:
    home.ensure()
    home.config_file.write_text(
        f"[gateway]\nport = {port}\n\n[container.kiosk]\n"
        f"extra_ca_file = {json.dumps(str(ca_file))}\n"
        f"resolve_overrides = {{ {json.dumps(SITE)} = {json.dumps(ip)} }}\n"
        # The default for a kind an agent uses, said outright: CORRAL_WARM_DEFAULT may be 0.
        "\n[container.rigs]\nbrowser_warm = 1\n"
    )
    text = render_new_agent(AGENT).replace("browser_use = false", "browser_use = true")
    text = text.replace(
        "max_actions = 50\nallowed_domains = []",
        f"max_actions = 10000\nallowed_domains = [{json.dumps(SITE)}]",
    )
    path = home.agent_file(AGENT)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text)


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise BenchError(f"{tool} {arguments} failed: {result.content}")
    return result


def text_of(result: Any) -> str:
    return " ".join(getattr(b, "text", "") for b in result.content)


async def timed(action: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await action()
    return (time.perf_counter() - started) * 1000


def pool_idle(home: CorralHome) -> int:
    """How many started browser rigs wait in the gateway's pool, by its audit."""
    idle = 0
    for event in AuditLog(home.audit_file).read():
        details = event.get("details") or {}
        if event["event"] == "rig_pool_ready" and details.get("surface") == "browser":
            idle = int(details["idle"])
        elif event["event"] == "rig_started" and details.get("warm"):
            idle -= 1
    return idle


def warm_flags(home: CorralHome) -> list[bool]:
    events = AuditLog(home.audit_file).read()
    return [bool(e["details"].get("warm")) for e in events if e["event"] == "rig_started"]


async def settle(home: CorralHome) -> None:
    with anyio.fail_after(120):
        while await anyio.to_thread.run_sync(pool_idle, home) < 1:
            await anyio.sleep(0.05)


async def measure(home: CorralHome, client: Client, runs: int, starts: int) -> list[Row]:
    warm_ms, cold_ms = [], []
    first = len(warm_flags(home))
    for _ in range(starts):
        await call(client, "rig_close")
        await settle(home)
        warm_ms.append(await timed(lambda: call(client, "browser_use", verb="screenshot")))
        await call(client, "rig_close")  # the pool refills 2 s after a claim: this one is cold
        cold_ms.append(await timed(lambda: call(client, "browser_use", verb="screenshot")))
    if warm_flags(home)[first:] != [True, False] * starts:
        raise BenchError(f"rig starts were not warm then cold: {warm_flags(home)[first:]}")
    await call(client, "browser_use", verb="navigate", url=HEAVY_URL)
    snapshot = text_of(await call(client, "browser_use", verb="extract", mode="a11y"))
    match = re.search(r"textbox[^\n]*\[ref=([a-z0-9]+)\]", snapshot)
    if match is None:
        raise BenchError("the heavy page's snapshot has no textbox ref")
    ref = match.group(1)

    async def click() -> Any:
        return await call(client, "browser_use", verb="click", ref=ref)

    async def extract() -> Any:
        return await call(client, "browser_use", verb="extract", mode="a11y")

    async def click_then_snapshot() -> None:
        await click()
        await extract()

    paths = {"click": click, "extract a11y": extract, "click + fresh snapshot": click_then_snapshot}
    samples: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for index in range(WARMUP + runs):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            ms = await timed(paths[name])
            if index >= WARMUP:
                samples[name].append(ms)
    await call(client, "rig_close")
    rows = [
        Row("rig start to first screenshot, warm pool", tuple(warm_ms)),
        Row("rig start to first screenshot, cold", tuple(cold_ms)),
    ]
    rows += [Row(f"browser_use {name}", tuple(samples[name])) for name in names]
    return rows


def markdown(rows: Sequence[Row], runs: int, starts: int) -> str:
    lines = [
        "<!-- bench:rigs:start -->",
        "## browser_use: click and extract a11y round trips, and rig start",
        "",
        "Command: `.venv/bin/python bench/rigs.py "
        f"--runs {runs} --starts {starts} --write docs/benchmarks.md`. Through corral's MCP "
        "front over stdio, the gateway and the CDP pipe, on the heavy page (50 inputs, "
        '3 iframes). "click + fresh snapshot" is Playwright MCP\'s way: every action '
        "answers with a new accessibility snapshot; corral answers an action alone and "
        "snapshots on `extract a11y`.",
        "",
        *latency_table(rows),
    ]
    lines.append("<!-- bench:rigs:end -->")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--write", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="corral-bench-rigs-") as tmp, heavy_site() as site:
        home = CorralHome(root=Path(tmp) / "home", env=Environment.from_environ(os.environ))
        port = free_port()
        prepare(home, port, site.ca_file, site.ip)
        with running_gateway(home, port, Path(tmp) / "gateway.log"):
            params = mcp_params(home, AGENT)

            async def run() -> list[Row]:
                async with Client(params, mode="legacy") as client:
                    return await measure(home, client, args.runs, args.starts)

            rows = anyio.run(run)
    section = markdown(rows, args.runs, args.starts)
    publish(console, section, args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, console)
