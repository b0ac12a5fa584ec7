"""A kiosk click, layer by layer: where each millisecond between the agent and the kiosk goes.

The same click (about:blank, 640,400) timed through each layer an agent's call crosses,
interleaved in rotating rounds so the machine's drift hits every row alike (one rotation
per agent below, each with the kiosk channel as its floor):

1. kiosk channel: corral's `KioskChannel` to a kiosk container of its own (same image,
   same hardening), op `click`: the floor, no corral in between.
2. gateway, signed HTTP: the front's own `mcp_front.forwarder.forward` called from this
   process with a long-lived client: signing, the loopback hop, the gateway (checks, the
   action pipeline, the audit) and its kiosk channel.
3. corral mcp, raw stdio: JSON-RPC lines written to `corral mcp`'s stdin and read from its
   stdout by this process (no MCP SDK on the client side): adds the front (the MCP SDK's
   server, the gate, the tool log) and the pipes.
4. corral mcp, MCP SDK client: the MCP Python SDK's client over the same pipes: what an
   agent sees.

Each for agent `bench-free` (no confirm words or URLs: no rule reads the click's target)
and agent `bench` (the template's confirm words: the click first reads what it acts on,
one more kiosk round trip), the two agents' rows in rotations of their own: a `bench`
click's target read has its kiosk's Chromium build the page's accessibility tree, work
that runs on past the answer and slowed the next click of another session by about 1 ms
p50 in one shared rotation (4.2-4.5 ms against 5.0-6.0 for `bench-free` through MCP,
measured here, 2026-12-07): another session's cost, not the layers'. (Clicks among busy
sessions are the soak's to measure: bench/soak.py.) Target (issue 23 item 9): through MCP
at most 6 ms p50.

Command (from the repository root):

    .venv/bin/python bench/layers.py --runs 200 --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from _common import (
    BenchError,
    NamedTimings,
    local_backend,
    publish,
    run_main,
    runs_and_write,
)
from computer_use import (
    agent_toml,
    corral_bin,
    corral_env,
    free_port,
    mcp_params,
    running_gateway,
    session_of,
)
from computer_use_paths import (
    AGENT,
    CLICK_X,
    CLICK_Y,
    FREE_AGENT,
    ChannelPath,
    McpPath,
    Observations,
    started_kiosk,
)
from computer_use_report import check_leftovers, describe_machine, machine_paragraph
from mcp import Client
from rich.console import Console

from mcp_front.forwarder import forward, gateway_client
from mcp_front.gateway_http import GatewayHttp
from orchestrator.backends.owner import read_start_time as owner_start_time
from orchestrator.home import CorralHome, Environment

SECTION = "layers"
WARMUP = 20
TARGET_MS = 6.0
console = Console(width=None if sys.stdout.isatty() else 120)

Timed = Callable[[], Awaitable[float]]


@dataclass(frozen=True)
class Row(NamedTimings):
    """One layer's samples (NamedTimings: name, samples_ms)."""


def prepare_home(home: CorralHome, port: int, recording: bool = True) -> None:
    home.ensure()
    text = f"[gateway]\nport = {port}\n"
    if not recording:
        text += "\n[recording]\nenabled = false\n"
    home.config_file.write_text(text, encoding="utf-8")
    for name, rules in ((AGENT, True), (FREE_AGENT, False)):
        path = home.agent_file(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(agent_toml(name, (), rules=rules), encoding="utf-8")


def click_arguments() -> dict[str, Any]:
    return {"x": CLICK_X, "y": CLICK_Y}


class RawStdio:
    """`corral mcp` over its pipes, JSON-RPC written and read by hand: the front's cost
    without a client SDK's."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.ids = itertools.count(1)
        self.buffer = b""

    async def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            chunk = await self.process.stdout.receive()
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise BenchError(f"corral mcp wrote {line[:200]!r}")
        return message

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        number = next(self.ids)
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")
        while True:
            answer = await self._line()
            if answer.get("id") == number:
                if "error" in answer:
                    raise BenchError(f"{method}: {answer['error']}")
                return dict(answer["result"])

    async def notify(self, method: str) -> None:
        assert self.process.stdin is not None
        message = {"jsonrpc": "2.0", "method": method}
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def click(self) -> float:
        started = time.perf_counter()
        result = await self.request(
            "tools/call", {"name": "computer_click", "arguments": click_arguments()}
        )
        elapsed = time.perf_counter() - started
        if result.get("isError"):
            raise BenchError(f"computer_click through raw stdio: {result}"[:400])
        return elapsed


@contextlib.asynccontextmanager
async def raw_stdio(home: CorralHome, agent: str) -> AsyncIterator[RawStdio]:
    command = [corral_bin(), "mcp", "--agent", agent]
    async with await anyio.open_process(command, env=corral_env(home)) as process:
        raw = RawStdio(process)
        await raw.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench-layers", "version": "1"},
            },
        )
        await raw.notify("notifications/initialized")
        try:
            yield raw
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()


def signed_click(home: CorralHome, url: str, agent: str, client: GatewayHttp) -> Timed:
    async def click() -> float:
        started = time.perf_counter()
        result = await forward(home, url, agent, "computer_click", click_arguments(), client=client)
        elapsed = time.perf_counter() - started
        if result.is_error:
            raise BenchError(f"computer_click through signed HTTP: {result.content}"[:400])
        return elapsed

    return click


def sdk_click(path: McpPath) -> Timed:
    return lambda: path.click(0)


def channel_click(path: ChannelPath) -> Timed:
    return lambda: path.click(0)


async def rounds(calls: dict[str, Timed], warmup: int, runs: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for run in range(warmup + runs):
        shift = run % len(names)
        for name in [*names[shift:], *names[:shift]]:
            elapsed = await calls[name]()
            if run >= warmup:
                samples[name].append(elapsed * 1000)
    return samples


def row_names(agent: str) -> list[str]:
    """The agent's rotation's rows: the kiosk channel (its floor), then each layer."""
    rules = "no confirm rules" if agent == FREE_AGENT else "confirm rules (target read)"
    return [
        f"kiosk channel, in the {rules} rotation",
        f"gateway, signed HTTP, {rules}",
        f"corral mcp, raw stdio, {rules}",
        f"corral mcp, MCP SDK client, {rules}",
    ]


async def measure(home: CorralHome, url: str, runs: int) -> dict[str, list[float]]:
    backend = local_backend()
    rotations: list[dict[str, Timed]] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            channel = ChannelPath(backend, Observations())
            channel.channel = await stack.enter_async_context(started_kiosk(backend, channel.obs))
            http = await stack.enter_async_context(gateway_client())
            for agent in (FREE_AGENT, AGENT):
                client = await stack.enter_async_context(
                    Client(mcp_params(home, agent), mode="legacy")
                )
                path = await stack.enter_async_context(session_of(McpPath(client, Observations())))
                raw = await stack.enter_async_context(raw_stdio(home, agent))
                floor, signed, stdio, sdk = row_names(agent)
                rotations.append(
                    {
                        floor: channel_click(channel),
                        signed: signed_click(home, url, agent, http),
                        stdio: raw.click,
                        sdk: sdk_click(path),
                    }
                )
            samples: dict[str, list[float]] = {}
            for calls in rotations:
                console.print(f"[dim]{WARMUP} warm-up + {runs} timed rounds...[/dim]")
                samples.update(await rounds(calls, WARMUP, runs))
            return samples
    finally:
        with anyio.CancelScope(shield=True):
            await backend.close()


def report(samples: dict[str, list[float]], runs: int, machine: str) -> str:
    rows = [Row(name, tuple(values)) for name, values in samples.items()]
    p50 = {row.name: row.p50 for row in rows}
    lines = [
        f"<!-- bench:{SECTION}:start -->",
        "## A kiosk click, layer by layer (issue 23 item 9)",
        "",
        (__doc__ or "").split("\n\n", 1)[1].split("Command (")[0].strip(),
        "",
        "Command (from the repository root):",
        "",
        "```sh",
        f".venv/bin/python bench/layers.py --runs {runs} --write docs/benchmarks.md",
        "```",
        "",
        machine,
        "",
        "| operation | n | p50 ms | p95 ms | min ms |",
        "|---|---|---|---|---|",
        *(
            f"| {r.name} | {len(r.samples_ms)} | {r.p50:.1f} | {r.p95:.1f} | {r.minimum:.1f} |"
            for r in rows
        ),
        "",
    ]
    for agent in (FREE_AGENT, AGENT):
        floor, signed, stdio, sdk = row_names(agent)
        lines.append(
            f"- {agent}: the gateway and the loopback hop add "
            f"{p50[signed] - p50[floor]:.1f} ms over the kiosk channel, the front and its "
            f"pipes {p50[stdio] - p50[signed]:.1f} ms, the client SDK "
            f"{p50[sdk] - p50[stdio]:.1f} ms; through MCP {p50[sdk]:.1f} ms p50: "
            f"{'PASS' if p50[sdk] <= TARGET_MS else 'MISS'} (target <= {TARGET_MS:g} ms)."
        )
    lines.append(f"<!-- bench:{SECTION}:end -->")
    return "\n".join(lines)


def recording_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-recording",
        action="store_true",
        help="sessions without their recording ([recording] enabled = false)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = runs_and_write(argv, __doc__, 200, "timed rounds (200)", recording_option)
    machine = machine_paragraph(describe_machine())
    me = os.getpid()
    owners: list[tuple[int, int | None]] = [(me, owner_start_time(me))]
    with tempfile.TemporaryDirectory(prefix="corral-bench-layers-") as tmp:
        home = CorralHome(Path(tmp).resolve() / "home", env=Environment.from_environ(os.environ))
        port = free_port()
        prepare_home(home, port, recording=not args.no_recording)
        try:
            with running_gateway(home, port, Path(tmp) / "gateway.log") as gateway:
                owners.append((gateway.proc.pid, gateway.start_time))
                samples = anyio.run(measure, home, gateway.url, args.runs)
        except BaseException:
            with contextlib.suppress(BenchError):  # the first failure is the one to report
                check_leftovers(owners)
            raise
        check_leftovers(owners)  # figures from a run that leaks are not published
    publish(console, report(samples, args.runs, machine), args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, console)
