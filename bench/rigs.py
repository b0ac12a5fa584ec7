"""Benchmark: browser_use through corral's MCP front side by side with the real
Playwright MCP server (`@playwright/mcp`, npm, pinned), same pages, same machine,
interleaved in one run (issue 23, item 4).

Run from the repository root:

    .venv/bin/python bench/rigs.py [--runs 20] [--starts 3] [--write docs/benchmarks.md]

corral's path: a throwaway CORRAL_HOME, `corral gateway` as a subprocess, `corral mcp
--agent bench-rig` over stdio (the 2.x SDK's Client), an agent with `browser_use = true`
whose allowed_domains is the site. Playwright MCP's: `node cli.js` over stdio from the
same client, driving Debian's Chromium headless (bench/playwright_mcp.py). The site
(bench/computer_use_site.py) is a local HTTPS container: a simple page, and the heavy
page (50 inputs, 5 secret, 3 iframes, a shadow root).

Measured, p50/p95/min in ms, each side's samples taken in alternation:

1. start to first screenshot: the browser closed (`rig_close` / `browser_close`), then
   open the page and take a screenshot, timed together (corral: `browser_use navigate`
   + `screenshot` from the warm pool the gateway keeps by default, its claim pinning the
   armed proxy; the audit must say it was warm. Playwright MCP: `browser_navigate` +
   `browser_take_screenshot`, its browser launched at the navigation), on the simple
   page and the heavy one; corral's cold start (right after a claim, while the pool
   waits to refill) as a row of its own;
2. click by ref on the heavy page (`browser_use click` / `browser_click`);
3. the accessibility snapshot with refs (`browser_use extract a11y` / `browser_snapshot`);
4. screenshot (`browser_use screenshot`, masked: 5 secret fields / `browser_take_screenshot`,
   unmasked).

WARMUP uncounted rounds first. Every container is removed at the end (the gateway's
stop, the site's own cleanup); Playwright MCP's browser ends with its server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import playwright_mcp as pw
from _common import BenchError, NamedTimings, publish, run_main
from computer_use import free_port, mcp_params, running_gateway
from computer_use_paths import console
from computer_use_site import HEAVY_URL, SITE, heavy_site, site_routes
from mcp import Client

from orchestrator.audit import AuditLog
from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome, Environment

AGENT = "bench-rig"
WARMUP = 3
REDO = 5
SECTION = "rigs"
COLD = "start to first screenshot, heavy page, corral cold (no pool)"
SIMPLE_PATH = "/simple"
SIMPLE_URL = f"https://{SITE}{SIMPLE_PATH}"
SIMPLE_PAGE = (
    "<!doctype html><html><head><title>simple</title></head><body>"
    '<h1>A simple page</h1><p>One paragraph.</p><a href="/heavy">the heavy page</a>'
    "</body></html>"
)
HTML = {"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}


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


class NetworkChanged(BenchError):
    """The host's Chromium dropped a request because a network interface came or went
    (a Docker network made or removed: corral's pools make them ahead)."""


# How the cut shows: the error itself, or (Playwright's word for the same cut, when
# Chromium's error page commits before the navigation's own answer) the navigation
# interrupted by one to Chromium's error page.
CUT_SIGNS = ("ERR_NETWORK_CHANGED", 'interrupted by another navigation to "chrome-error://')


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = text_of(result)
        if any(sign in text for sign in CUT_SIGNS):
            raise NetworkChanged(f"{tool}: {text[:200]}")
        raise BenchError(f"{tool} {arguments} failed: {result.content}")
    return result


def text_of(result: Any) -> str:
    return " ".join(getattr(b, "text", "") for b in result.content)


async def nothing() -> None:
    return None


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


@dataclass
class Side:
    """One server's samples, row by row."""

    client: Client
    samples: dict[str, list[float]] = field(default_factory=dict)

    redone: int = 0  # samples taken again after NetworkChanged (not counted)

    def add(self, row: str, ms: float) -> None:
        self.samples.setdefault(row, []).append(ms)

    async def sample(
        self, action: Callable[[], Awaitable[Any]], before: Callable[[], Awaitable[Any]]
    ) -> float:
        """`action`'s time after `before` (untimed); a sample cut by NetworkChanged is
        taken again, at most REDO times."""
        for _ in range(REDO):
            await before()
            try:
                return await timed(action)
            except NetworkChanged:
                self.redone += 1
        raise BenchError(f"{REDO} samples in a row cut by net::ERR_NETWORK_CHANGED")


@dataclass(frozen=True)
class Pair:
    """One row of the side-by-side table."""

    name: str
    corral: Row
    reference: Row | None  # None: corral only (its cold start)


async def starts_side_by_side(home: CorralHome, ours: Side, theirs: Side, starts: int) -> None:
    """Start to first screenshot on each page, alternating sides; right after corral's
    warm start on the heavy page, a cold one (the pool refills 2 s after a claim)."""
    first = len(warm_flags(home))
    for index in range(starts):
        for url, page in ((SIMPLE_URL, "simple"), (HEAVY_URL, "heavy")):
            row = f"start to first screenshot, {page} page"

            async def corral_start(row: str = row, url: str = url) -> None:
                await call(ours.client, "rig_close")
                await settle(home)
                ours.add(row, await timed(lambda: corral_open(ours.client, url)))
                if url == HEAVY_URL:
                    await call(ours.client, "rig_close")
                    ours.add(COLD, await timed(lambda: corral_open(ours.client, url)))

            async def reference_start(row: str = row, url: str = url) -> None:
                ms = await theirs.sample(
                    lambda: reference_open(theirs.client, url),
                    lambda: call(theirs.client, "browser_close"),
                )
                theirs.add(row, ms)

            for step in (corral_start, reference_start)[:: 1 if index % 2 == 0 else -1]:
                await step()
    if warm_flags(home)[first:] != [True, True, False] * starts:
        raise BenchError(f"rig starts were not warm, warm, cold: {warm_flags(home)[first:]}")


async def corral_open(client: Client, url: str) -> None:
    await call(client, "browser_use", verb="navigate", url=url)
    await call(client, "browser_use", verb="screenshot")


async def reference_open(client: Client, url: str) -> None:
    await call(client, "browser_navigate", url=url)
    if not pw.has_image(await call(client, "browser_take_screenshot", type="png")):
        raise BenchError("Playwright MCP's screenshot answer has no image")


async def actions_side_by_side(ours: Side, theirs: Side, runs: int) -> None:
    """Click by ref, a11y snapshot and screenshot on the heavy page, each round in
    rotating order, corral and Playwright MCP back to back (which goes first alternates)."""
    await call(ours.client, "browser_use", verb="navigate", url=HEAVY_URL)
    snapshot = text_of(await call(ours.client, "browser_use", verb="extract", mode="a11y"))
    match = re.search(r"textbox[^\n]*\[ref=([a-z0-9]+)\]", snapshot)
    if match is None:
        raise BenchError("the heavy page's snapshot has no textbox ref")
    ours_ref = match.group(1)
    # Its navigation's snapshot goes to a file; the refs come from browser_snapshot.
    await theirs.sample(lambda: call(theirs.client, "browser_navigate", url=HEAVY_URL), nothing)
    theirs_ref = pw.textbox_ref(text_of(await call(theirs.client, "browser_snapshot")))
    corral_paths: dict[str, Callable[[], Awaitable[Any]]] = {
        "click by ref": lambda: call(ours.client, "browser_use", verb="click", ref=ours_ref),
        "a11y snapshot": lambda: call(ours.client, "browser_use", verb="extract", mode="a11y"),
        "screenshot": lambda: call(ours.client, "browser_use", verb="screenshot"),
    }
    reference_paths: dict[str, Callable[[], Awaitable[Any]]] = {
        "click by ref": lambda: call(
            theirs.client, "browser_click", element="the first text box", target=theirs_ref
        ),
        "a11y snapshot": lambda: call(theirs.client, "browser_snapshot"),
        "screenshot": lambda: call(theirs.client, "browser_take_screenshot", type="png"),
    }
    names = list(corral_paths)
    for index in range(WARMUP + runs):
        for name in names[index % 3 :] + names[: index % 3]:
            pairs = [(ours, corral_paths[name]), (theirs, reference_paths[name])]
            for side, path in pairs[:: 1 if index % 2 == 0 else -1]:
                ms = await side.sample(path, nothing)
                if index >= WARMUP:
                    side.add(name, ms)
    await call(ours.client, "rig_close")


def pairs_of(ours: Side, theirs: Side) -> list[Pair]:
    def row(side: Side, name: str) -> Row:
        return Row(name, tuple(side.samples[name]))

    pairs = [Pair(n, row(ours, n), row(theirs, n)) for n in theirs.samples]
    starts = [p for p in pairs if p.name.startswith("start")]
    return [*starts, Pair(COLD, row(ours, COLD), None), *[p for p in pairs if p not in starts]]


def side_by_side_table(pairs: Sequence[Pair]) -> list[str]:
    lines = [
        "| operation | n | corral p50 | corral p95 | Playwright MCP p50 | Playwright MCP p95 "
        "| corral / Playwright MCP at p50 |",
        "|---|---|---|---|---|---|---|",
    ]
    for pair in pairs:
        ours, theirs = pair.corral, pair.reference
        if theirs is None:
            lines.append(
                f"| {pair.name} | {len(ours.samples_ms)} | {ours.p50:.0f} | {ours.p95:.0f} | | | |"
            )
            continue
        lines.append(
            f"| {pair.name} | {len(ours.samples_ms)} | {ours.p50:.0f} | {ours.p95:.0f} "
            f"| {theirs.p50:.0f} | {theirs.p95:.0f} | {ours.p50 / theirs.p50:.2f} |"
        )
    return lines


def markdown(pairs: Sequence[Pair], runs: int, starts: int, version: str, redone: int) -> str:
    lines = [
        "<!-- bench:rigs:start -->",
        "## browser_use side by side with Playwright MCP",
        "",
        "Command: `.venv/bin/python bench/rigs.py "
        f"--runs {runs} --starts {starts} --write docs/benchmarks.md`. corral through its "
        "MCP front over stdio, the gateway and the CDP pipe to the rig's Chromium; "
        f"Playwright MCP {version} (`@playwright/mcp`, npm) over stdio from the same client, "
        "Debian's Chromium headless on the host. Same local HTTPS site, same viewport, "
        "samples alternating between the two. Playwright MCP answers each action with a "
        "fresh snapshot after the page settles; corral answers the action alone. corral's "
        "screenshots are masked (the heavy page has 5 secret fields); Playwright MCP's are not.",
        "",
        *side_by_side_table(pairs),
        "",
        f"p50 / p95 in ms, nearest rank. Playwright MCP samples taken again because the "
        f"host's Chromium cut a request at a network change (net::ERR_NETWORK_CHANGED, or "
        f"the navigation interrupted by Chromium's error page: corral's pools make Docker "
        f"networks ahead): {redone}.",
        "<!-- bench:rigs:end -->",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--write", default=None)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.starts < 1:
        parser.error("--runs and --starts must be at least 1")
    version = pw.ensure_installed()
    routes = {**site_routes(), SIMPLE_PATH: (200, HTML, SIMPLE_PAGE)}
    with (
        tempfile.TemporaryDirectory(prefix="corral-bench-rigs-") as tmp,
        heavy_site(routes) as site,
    ):
        home = CorralHome(root=Path(tmp) / "home", env=Environment.from_environ(os.environ))
        port = free_port()
        prepare(home, port, site.ca_file, site.ip)
        with running_gateway(home, port, Path(tmp) / "gateway.log"):
            ours_params = mcp_params(home, AGENT)
            theirs_params = pw.server_params(Path(tmp), SITE, site.ip)

            async def run() -> tuple[list[Pair], int]:
                async with (
                    Client(ours_params, mode="legacy") as ours_client,
                    Client(theirs_params, mode="legacy") as theirs_client,
                ):
                    ours, theirs = Side(ours_client), Side(theirs_client)
                    await starts_side_by_side(home, ours, theirs, args.starts)
                    await actions_side_by_side(ours, theirs, args.runs)
                    await call(theirs_client, "browser_close")
                return pairs_of(ours, theirs), theirs.redone

            pairs, redone = anyio.run(run)
    section = markdown(pairs, args.runs, args.starts, version, redone)
    publish(console, section, args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, console)
