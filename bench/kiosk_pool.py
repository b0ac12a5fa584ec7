"""Benchmark: computer_session_start to the first screenshot, from the kiosk warm pool and
cold, through corral's MCP front (issue 14).

Run from the repository root:

    .venv/bin/python bench/kiosk_pool.py [--starts 15] [--write docs/benchmarks.md]

Two `corral gateway`s on free ports, each with its own throwaway CORRAL_HOME: one with
`[container.kiosk] warm = 2`, one with the pool off (`warm = 0`). Both have the agents of
bench/computer_use.py: AGENT (no allowed_domains: no network) and WEB_AGENT (the local
HTTPS site of bench/computer_use_site.py allowed: a session network and its proxy).
Each timed call is `computer_session_start` + `computer_screenshot` over the 2.x SDK's
stdio client (`corral mcp --agent ...`), then `computer_session_stop` (not timed).

Rounds are interleaved: START_WARMUP uncounted rounds, then --starts timed rounds, each
running the four (agent, gateway) paths once in rotating order. Before a warm call the
pool is let settle: both pool kiosks of the warm gateway started (its audit's last
`kiosk_pool_ready` since the last session start says 2 wait) and running (`docker ps`).
Every warm session start must be audited `warm: true` (a claim from the pool), every
cold one `warm: false`: the table says how many were, and the benchmark fails otherwise.
No container of the benchmark or its gateways may be left at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from _common import BenchError, Timings, docker_cli, markers, run_main, write_section
from computer_use import free_port, mcp_params, prepare_home, running_gateway
from computer_use_paths import AGENT, START_WARMUP, WEB_AGENT, McpPath, Observations
from computer_use_report import check_leftovers, describe_machine, machine_paragraph
from computer_use_site import heavy_site
from mcp import Client
from rich.console import Console
from rich.table import Table

from orchestrator.audit import AuditLog
from orchestrator.backends.owner import read_start_time as owner_start_time
from orchestrator.config import load_config
from orchestrator.home import CorralHome, Environment

DEFAULT_STARTS = 15
POOL = 2
SECTION = "kiosk_pool"
SECTION_START, SECTION_END = markers(SECTION)
TARGET_MS = 300.0
console = Console()

PATHS = (
    ("no allowlist", "warm pool"),
    ("no allowlist", "cold"),
    ("allowlist (1 site)", "warm pool"),
    ("allowlist (1 site)", "cold"),
)


@dataclass(frozen=True, slots=True)
class Row(Timings):
    agent: str
    path: str
    samples_ms: tuple[float, ...]
    hits: int  # starts audited as warm claims


def enable_pool(home: CorralHome, size: int) -> None:
    """Append `warm = size` to config.toml's [container.kiosk] (its last table)."""
    text = home.config_file.read_text(encoding="utf-8")
    if not text.rstrip().splitlines()[-1].startswith("resolve_overrides"):
        raise BenchError("config.toml does not end in [container.kiosk] as expected")
    home.config_file.write_text(text + f"warm = {size}\n", encoding="utf-8")
    if load_config(home.config_file).container.kiosk.warm != size:
        raise BenchError("config.toml does not carry the pool size")


def pool_running(gateway_pid: int) -> int:
    out = docker_cli(
        "ps",
        "--filter",
        f"label=corral.owner.pid={gateway_pid}",
        "--filter",
        "label=corral.agent=warm-pool",
        "--filter",
        "label=corral.kind=kiosk",  # not their armed proxies
        "--format",
        "{{.ID}}",
    )
    return len(out.split())


def pool_full(home: CorralHome) -> bool:
    """Whether the audit's last pool event since the last session start says it is full."""
    full = False
    for event in AuditLog(home.audit_file).read():
        if event["event"] == "computer_session_started":
            full = False
        elif event["event"] == "kiosk_pool_ready":
            full = event["details"]["idle"] == POOL
    return full


async def settle(home: CorralHome, gateway_pid: int) -> None:
    """Until every pool kiosk is started (audited `kiosk_pool_ready`) and running."""
    with anyio.fail_after(120):
        while not (
            await anyio.to_thread.run_sync(pool_full, home)
            and await anyio.to_thread.run_sync(pool_running, gateway_pid) == POOL
        ):
            await anyio.sleep(0.05)


def warm_flags(home: CorralHome, agent: str) -> list[bool]:
    return [
        bool(e["details"].get("warm"))
        for e in AuditLog(home.audit_file).read()
        if e["event"] == "computer_session_started" and e["agent"] == agent
    ]


async def measure(
    homes: dict[str, CorralHome], warm_pid: int, starts: int
) -> dict[tuple[str, str], list[float]]:
    samples: dict[tuple[str, str], list[float]] = {p: [] for p in PATHS}
    obs = Observations()
    agents = {"no allowlist": AGENT, "allowlist (1 site)": WEB_AGENT}
    async with contextlib.AsyncExitStack() as stack:
        paths: dict[tuple[str, str], McpPath] = {}
        for label, path in PATHS:
            client = await stack.enter_async_context(
                Client(mcp_params(homes[path], agents[label]), mode="legacy")
            )
            paths[(label, path)] = McpPath(client, obs)
        for run in range(START_WARMUP + starts):
            shift = run % len(PATHS)
            for key in [*PATHS[shift:], *PATHS[:shift]]:
                if key[1] == "warm pool":
                    await settle(homes["warm pool"], warm_pid)
                elapsed = await paths[key].start_to_screenshot(run)
                if run >= START_WARMUP:
                    samples[key].append(elapsed * 1000)
    return samples


def rows_of(
    samples: dict[tuple[str, str], list[float]], homes: dict[str, CorralHome], starts: int
) -> list[Row]:
    agents = {"no allowlist": AGENT, "allowlist (1 site)": WEB_AGENT}
    rows = []
    for label, path in PATHS:
        flags = warm_flags(homes[path], agents[label])[START_WARMUP:]
        hits = sum(flags)
        expected = len(flags) if path == "warm pool" else 0
        if len(flags) != starts or hits != expected:
            raise BenchError(
                f"{label}, {path}: {hits} of {len(flags)} starts were warm claims, "
                f"expected {expected} of {starts}"
            )
        rows.append(Row(label, path, tuple(samples[(label, path)]), hits))
    return rows


HEADERS = ("session", "kiosk", "starts", "warm claims", "p50 ms", "p95 ms", "min ms", "target")


def table_rows(rows: Sequence[Row]) -> list[list[str]]:
    out = []
    for r in rows:
        target = ""
        if r.path == "warm pool" and r.agent == "no allowlist":
            target = ("PASS" if r.p50 <= TARGET_MS else "FAIL") + f" (<= {TARGET_MS:.0f})"
        out.append(
            [
                r.agent,
                r.path,
                str(len(r.samples_ms)),
                str(r.hits),
                f"{r.p50:.1f}",
                f"{r.p95:.1f}",
                f"{r.minimum:.1f}",
                target,
            ]
        )
    return out


def markdown_section(rows: Sequence[Row], machine_text: str, command: str) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|---|---|" + "---:|" * 5 + "---|"]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(rows)]
    table = "\n".join(lines)
    return f"""{SECTION_START}
## Kiosk warm pool: session start to first screenshot

`computer_session_start` + `computer_screenshot` through the MCP front (`corral mcp` over
stdio, the 2.x SDK's client) and the gateway, from a gateway with `[container.kiosk] warm
= {POOL}` and from one without a pool. "allowlist" sessions allow one local HTTPS site: a
warm claim then resolves the pins and pins the armed proxy made with the pool kiosk's
network (one control round trip; issue 23: before, it started the proxy container); a
session without an allowlist only takes the kiosk off its network. Either way the kiosk's
`claim` op replaces its page with a new about:blank document and waits until it is drawn. Paths
interleaved, {START_WARMUP} warm-up rounds, the pool let settle (full, no refill under
way) before each warm call;
"warm claims" counts the starts the audit records as claims from the pool. Target
(issue 14): p50 <= {TARGET_MS:.0f} ms from the pool (the no-allowlist row).

Command (from the repository root):

```sh
{command}
```

{machine_text}

{table}
{SECTION_END}"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--starts", type=int, default=DEFAULT_STARTS)
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)
    if args.starts < 1:
        parser.error("--starts must be at least 1")
    machine = describe_machine()
    me = os.getpid()
    owners: list[tuple[int, int | None]] = [(me, owner_start_time(me))]
    with tempfile.TemporaryDirectory(prefix="corral-bench-pool-") as tmp, heavy_site() as site:
        homes = {
            "warm pool": CorralHome(Path(tmp) / "warm", env=Environment.from_environ(os.environ)),
            "cold": CorralHome(Path(tmp) / "cold", env=Environment.from_environ(os.environ)),
        }
        ports = {name: free_port() for name in homes}
        for name, home in homes.items():
            prepare_home(home, ports[name], site)
        enable_pool(homes["warm pool"], POOL)
        enable_pool(homes["cold"], 0)  # off: unset would keep one (fast by default)
        try:
            with (
                running_gateway(homes["warm pool"], ports["warm pool"], Path(tmp) / "w.log") as w,
                running_gateway(homes["cold"], ports["cold"], Path(tmp) / "c.log") as c,
            ):
                owners += [(w.proc.pid, w.start_time), (c.proc.pid, c.start_time)]
                started = time.monotonic()
                samples = anyio.run(measure, homes, w.proc.pid, args.starts)
                console.print(f"[dim]measured in {time.monotonic() - started:.0f} s[/dim]")
        except BaseException:
            with contextlib.suppress(BenchError):
                check_leftovers(owners)
            raise
        check_leftovers(owners)
        rows = rows_of(samples, homes, args.starts)
    table = Table(title="session start to first screenshot")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i < 2 else "right")
    for row in table_rows(rows):
        table.add_row(*row)
    console.print(table)
    if args.write is not None:
        argv = [".venv/bin/python", "bench/kiosk_pool.py", "--starts", str(args.starts)]
        command = shlex.join([*argv, "--write", args.write])
        section = markdown_section(rows, machine_paragraph(machine), command)
        write_section(Path(args.write), SECTION, section)
        console.print(f"wrote the section to {args.write}")
    console.print(json.dumps({f"{r.agent}/{r.path}": round(r.p50, 1) for r in rows}))
    return 0


if __name__ == "__main__":
    run_main(main, console)
