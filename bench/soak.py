"""Benchmark: a soak run of N kiosk sessions and execute_program scripts at once.

N agents drive kiosk sessions through their own MCP servers while execute_program scripts run,
all against one gateway; reported: errors, leaks, the gateway's memory, the click round trip.

Run from the repository root:

    .venv/bin/python bench/soak.py [--agents 10] [--actions 300] [--scripts 20]
        [--script-clients 4] [--write docs/benchmarks.md]

One run:

1. a throwaway CORRAL_HOME: `[gateway] port` on a free port, `[container.sandbox]
   max_concurrent` = --script-clients; agents soak-01, soak-02, ... (the rendered template
   with computer_use = true, max_actions = 10000 and no allowed_domains, so the sessions have
   no network) and soak-scripts (the template as rendered: execute_program only);
2. `corral gateway` as a subprocess, in its own session so that Ctrl-C reaches this process
   only, which then stops everything in order; the gateway's resident memory
   (/proc/PID/status: VmRSS, and its anonymous and file-backed parts) is read before the
   first session starts, every second (RSS), at the end and once settled;
3. every agent at once: `corral mcp --agent NAME` over stdio (the MCP SDK's `Client(...,
   mode="legacy")`), `computer_session_start`, then --actions actions (every 10th a
   computer_screenshot, the others computer_click, computer_scroll and computer_key "Tab" in
   turn, each call timed), then `computer_session_stop`;
4. at the same time (actions and scripts both start once every session has started):
   --scripts execute_program calls over --script-clients MCP servers of soak-scripts, each
   server running its share one after another;
   out of step (the default), agent k begins its cycle of 10 actions at its own place in it
   and script server i waits i x 5 / --script-clients s before its first script, so no kind
   of action and no wave of containers falls due everywhere at once; `--in-step` starts
   them all together (a stress case);
5. the leftover check, twice: once every session stopped and every script returned (the
   gateway still running), and after the gateway stopped: containers and networks labelled
   corral.managed=true whose owner labels name this process, the gateway or one of the
   `corral mcp` servers. Whatever is found is counted as leaked, then removed.

`--only TOOL` makes every action that one tool (`idle`: none sent, the sessions open as
long), `--no-confirm-words` gives the agents no confirm words (no click reads its target
first) and `--summary PATH` writes each tool's latencies as JSON: bench/action_cost.py
runs the soak that way, once per kind of action, for what one action costs.

Targets, printed PASS/FAIL (exit code 1 if one fails): no error, nothing leaked (no
recording's encoder process left either), the gateway's RSS back within 20 MiB of where it
was before the sessions (shown split: anonymous, files), click p95 under 50 ms when paced
(`--think-ms`: issue 9's), under 80 ms with `--rate` (issue 23 item 6's, at the rate it
names); back to back and `--in-step` are stress runs, their click times shown and not
judged. Ctrl-C stops
the run: the MCP servers are closed, the gateway gets SIGTERM (which ends the sessions), and
the leftover check after it reports and removes whatever is still there (exit code 130).

This file is the command: the CORRAL_HOME, the gateway, the agents and the scripts, main.
The plan, the record, the leftover check and the report are in bench/soak_report.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import tempfile
import time
import tomllib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import machine_cpu
import mcp_types as types
import memory_trace
import profiles
from _common import (
    BenchError,
    Child,
    children_of,
    nearest_rank,
    run_main,
    running_children,
    sigint_ignored,
    write_section,
)
from computer_use import Gateway, corral_bin, corral_env, free_port, running_gateway
from computer_use import agent_toml as kiosk_agent_toml
from computer_use_paths import result_text
from computer_use_report import describe_machine
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from rich.markup import escape
from soak_report import (
    ACTION_TOOLS,
    CLICK,
    DEFAULT_ACTIONS,
    DEFAULT_AGENTS,
    DEFAULT_SCRIPT_CLIENTS,
    DEFAULT_SCRIPTS,
    HEIGHT,
    IDLE,
    KEY,
    MAX_ACTIONS,
    SCREENSHOT_EVERY,
    SCRIPT_AGENT,
    SCRIPT_CODE,
    SCRIPT_OUTPUT,
    SCROLL,
    SETTLE_S,
    SHOT,
    WIDTH,
    Leaks,
    Memory,
    Owner,
    Plan,
    Record,
    console,
    markdown_section,
    parse_memory,
    print_report,
    remove_leftovers,
)

from orchestrator.backends.owner import read_start_time
from orchestrator.config import AgentConfig, load_config, render_new_agent
from orchestrator.gateway.warm_pools import wanted_sizes
from orchestrator.home import CorralHome, Environment

CALL_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
SCRIPT_TIMEOUT_S = 60  # execute_program's own timeout_seconds: far above the 5 s sleep
RSS_INTERVAL_S = 1.0
MAX_SCRIPT_CLIENTS = 256  # [container.sandbox] max_concurrent allows 1-256
MAX_QUEUED = 1000  # [container.sandbox] max_queued allows 0-1000
MAX_RATE = 1000  # actions a second across all agents (--rate)
EXIT_INTERRUPTED = 130


# --- the CORRAL_HOME ------------------------------------------------------------------


def agent_names(count: int) -> list[str]:
    width = max(2, len(str(count)))
    return [f"soak-{i:0{width}d}" for i in range(1, count + 1)]


def agent_toml(name: str, computer_use: bool, rules: bool = True) -> str:
    """A kiosk agent's: computer_use on, the largest action budget, no network and (unless
    `rules` is off) the template's confirm words (`computer_use.agent_toml`); the scripts'
    agent: the template as rendered."""
    if computer_use:
        return kiosk_agent_toml(name, (), rules=rules)
    text = render_new_agent(name)
    if AgentConfig.model_validate(tomllib.loads(text)).capabilities.computer_use:
        raise BenchError(f"the agent.toml of {name} does not say what the benchmark needs")
    return text


def prepare_home(home: CorralHome, port: int, plan: Plan) -> None:
    home.ensure()
    queued = min(max(plan.scripts, 1), MAX_QUEUED)
    home.config_file.write_text(
        f"[gateway]\nport = {port}\n\n[container.sandbox]\n"
        f"max_concurrent = {plan.script_clients}\nmax_queued = {queued}\n"
        + ("" if plan.recording else "\n[recording]\nenabled = false\n"),
        encoding="utf-8",
    )
    config = load_config(home.config_file)
    if (
        config.gateway.port != port
        or config.container.sandbox.max_concurrent != plan.script_clients
    ):
        raise BenchError("config.toml does not carry the gateway port and max_concurrent")
    agents = [(name, True) for name in agent_names(plan.agents)] + [(SCRIPT_AGENT, False)]
    for name, computer_use in agents:
        path = home.agent_file(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(agent_toml(name, computer_use, plan.confirm_words), encoding="utf-8")


# --- processes ------------------------------------------------------------------------


def memory_of(pid: int) -> Memory | None:
    """The resident memory of `pid` (/proc/PID/status), or None if it no longer runs."""
    try:
        return parse_memory(Path(f"/proc/{pid}/status").read_text(encoding="utf-8"))
    except OSError:
        return None


def encoders_among(children: list[Child]) -> list[int]:
    """The pids of the recordings' encoder processes among the gateway's `children`."""
    return [c.pid for c in children if b"orchestrator.recordings.encoder" in c.argv]


def owners(children: list[Child]) -> set[Owner]:
    """(pid, start time) of each of `children`: this process's are the `corral mcp` servers."""
    return {(child.pid, child.start_time) for child in children}


# --- the agents and the scripts -------------------------------------------------------


class Countdown:
    """Set once `count` arrivals happened: every agent's session start was answered."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.done = anyio.Event()
        if count <= 0:
            self.done.set()

    def arrive(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.done.set()


@dataclass
class Run:
    home: CorralHome
    plan: Plan
    gateway: Gateway
    logs: Path
    record: Record
    ready: Countdown


@asynccontextmanager
async def mcp_client(run: Run, agent: str, log_name: str) -> AsyncIterator[Client]:
    """`corral mcp --agent AGENT` over stdio, its stderr into a log file; its pid recorded."""
    params = StdioServerParameters(
        command=corral_bin(), args=["mcp", "--agent", agent], env=corral_env(run.home)
    )
    with (run.logs / f"mcp-{log_name}.log").open("w", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            run.record.owners |= owners(running_children(os.getpid()))
            yield client


async def call(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    record: Record,
    timeout: float = CALL_TIMEOUT_S,
) -> tuple[types.CallToolResult | None, float]:
    """One tool call: its result (None after an error, which is recorded) and its ms."""
    began = time.perf_counter()
    try:
        with anyio.fail_after(timeout):
            result = await client.call_tool(tool, arguments)
    except Exception as exc:
        record.error(f"{tool}: {type(exc).__name__}: {exc}")
        return None, 0.0
    elapsed_ms = (time.perf_counter() - began) * 1000
    if result.is_error:
        record.error(f"{tool}: {result_text(result)}")
        return None, elapsed_ms
    return result, elapsed_ms


def action(index: int, only: str = "") -> tuple[str, dict[str, Any]]:
    """The index-th action of an agent: every 10th a screenshot, else click, scroll, key;
    with `only` (a tool of ACTION_TOOLS), every action that one."""
    if only == SHOT or (not only and index % SCREENSHOT_EVERY == SCREENSHOT_EVERY - 1):
        return SHOT, {}
    kinds = (CLICK, SCROLL, KEY)
    turn = 3 * index + kinds.index(only) if only else index - index // SCREENSHOT_EVERY
    x = 40 + (index * 97) % (WIDTH - 80)
    y = 40 + (index * 61) % (HEIGHT - 80)
    if turn % 3 == 0:
        return CLICK, {"x": x, "y": y}
    if turn % 3 == 1:
        direction = "down" if turn // 3 % 2 == 0 else "up"
        return SCROLL, {"x": x, "y": y, "direction": direction, "amount": 1}
    return KEY, {"key": "Tab"}


async def act(client: Client, run: Run, slot: int) -> None:
    """The agent's actions: back to back, with a pause after each, or (`--rate`) each at
    its time on a schedule; agent `slot`'s schedule is offset by slot / rate so that the
    agents' actions interleave rather than fall due at once, and (out of step) it begins
    its cycle of actions at its own place in it (`Plan.first_action`)."""
    record = run.record
    plan = run.plan
    interval = plan.agents / plan.rate if plan.rate else 0.0
    began = time.perf_counter() + slot / plan.rate if plan.rate else 0.0
    for index in range(plan.actions):
        if interval:
            # the load model, not a synchronisation
            await anyio.sleep(max(0.0, began + index * interval - time.perf_counter()))
        if plan.only == IDLE:
            continue  # the sessions' cost with no input (bench/action_cost.py's baseline)
        tool, arguments = action(plan.first_action(slot) + index, plan.only)
        loaded = record.scripts_in_flight > 0
        result, elapsed_ms = await call(client, tool, arguments, record)
        if result is None:
            continue
        if tool == SHOT and not any(isinstance(b, types.ImageContent) for b in result.content):
            record.error(f"{SHOT}: no image in the answer: {result_text(result)}")
            continue
        record.latencies_ms[tool].append(elapsed_ms)
        if tool == CLICK and loaded:
            record.loaded_click_ms.append(elapsed_ms)
        if run.plan.think_ms:
            await anyio.sleep(run.plan.think_ms / 1000)  # the load model, not a synchronisation


async def run_agent(slot: int, name: str, run: Run) -> None:
    record = run.record
    arrived = False
    try:
        async with mcp_client(run, name, name) as client:
            size = {"width": WIDTH, "height": HEIGHT}
            started, _ = await call(client, "computer_session_start", size, record)
            if started is not None:
                record.sessions_started += 1
                if record.sessions_started == 1 and run.home.env.traced_frames:
                    await anyio.to_thread.run_sync(
                        memory_trace.take, run.gateway.proc.pid, run.home.root / "debug", 1
                    )
            run.ready.arrive()
            arrived = True
            await run.ready.done.wait()
            if started is None:
                return
            await act(client, run, slot)
            # Not reached on Ctrl-C (a cancellation): there, the gateway's SIGTERM ends it.
            stopped, _ = await call(client, "computer_session_stop", {}, record, STOP_TIMEOUT_S)
            if stopped is not None:
                record.sessions_stopped += 1
    except Exception as exc:
        record.error(f"{name}: the MCP client failed: {type(exc).__name__}: {exc}")
    finally:
        if not arrived:
            run.ready.arrive()


def script_ok(result: types.CallToolResult) -> bool:
    data = result.structured_content or {}
    output = data.get("output")
    return (
        data.get("exit_code") == 0
        and data.get("sandboxed") is True
        and isinstance(output, str)
        and output.strip() == SCRIPT_OUTPUT
    )


async def run_scripts(index: int, count: int, run: Run) -> None:
    record = run.record
    arguments = {"code": SCRIPT_CODE, "timeout_seconds": SCRIPT_TIMEOUT_S}
    try:
        async with mcp_client(run, SCRIPT_AGENT, f"scripts-{index}") as client:
            await run.ready.done.wait()
            await anyio.sleep(run.plan.scripts_after(index))  # the load model (`Plan`)
            for _ in range(count):
                record.scripts_run += 1
                record.scripts_in_flight += 1
                try:
                    result, _ = await call(client, "execute_program", arguments, record)
                finally:
                    record.scripts_in_flight -= 1
                if result is None:
                    continue
                if script_ok(result):
                    record.scripts_ok += 1
                else:
                    record.error(f"execute_program: not ok: {result_text(result)[:160]}")
    except Exception as exc:
        record.error(f"scripts-{index}: the MCP client failed: {type(exc).__name__}: {exc}")


async def sample(run: Run) -> None:
    """The gateway's RSS and this process's children, every RSS_INTERVAL_S, and (once the
    load began) how busy the machine's cores were since the last sample, until cancelled."""
    record = run.record
    cores = machine_cpu.BusyMeter()
    loading = False  # whether the load had begun at the previous read
    while True:
        busy = cores.read()
        if busy is not None and loading:  # a second wholly in the load
            record.cpu_busy_shares.append(busy)
        loading = run.ready.done.is_set()
        value = memory_of(run.gateway.proc.pid)
        if value is not None:
            record.rss_samples_kib.append(value.rss)
        elif not any("the gateway exited" in message for message in record.errors):
            record.error(f"the gateway exited during the run: {run.gateway.log_tail()[-400:]}")
        found = children_of({os.getpid(), run.gateway.proc.pid})
        record.owners |= owners(found[os.getpid()])
        encoders = [m.rss for m in map(memory_of, encoders_among(found[run.gateway.proc.pid])) if m]
        if sum(encoders) > record.encoders_peak[1]:
            record.encoders_peak = (len(encoders), sum(encoders))
        await anyio.sleep(RSS_INTERVAL_S)


def shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def soak(
    home: CorralHome,
    plan: Plan,
    gateway: Gateway,
    logs: Path,
    record: Record,
    profile: Path | None = None,
) -> None:
    run = Run(home, plan, gateway, logs, record, Countdown(plan.agents))
    record.memory_before = memory_of(gateway.proc.pid)  # healthy, before any session
    files: dict[str, Path] = {}
    async with anyio.create_task_group() as outer:
        outer.start_soon(sample, run)
        with contextlib.ExitStack() as profiling:
            async with anyio.create_task_group() as work:
                for slot, name in enumerate(agent_names(plan.agents)):
                    work.start_soon(run_agent, slot, name, run)
                for index, count in enumerate(shares(plan.scripts, plan.script_clients)):
                    if count:
                        work.start_soon(run_scripts, index, count, run)
                console.print(f"[dim]starting {plan.agents} session(s)...[/dim]")
                await run.ready.done.wait()
                console.print(
                    f"[dim]{record.sessions_started} session(s) started; "
                    f"{plan.actions} actions each, {plan.scripts} script(s) meanwhile...[/dim]"
                )
                if profile is not None:  # the gateway and the first agent's MCP server
                    front = profiles.child_with(agent_names(plan.agents)[0])
                    pids = {"gateway": gateway.proc.pid, "front": front}
                    files = profiling.enter_context(profiles.profiled(pids, profile))
                began = time.perf_counter()
        record.load_phase_s = time.perf_counter() - began
        record.memory_end = memory_of(run.gateway.proc.pid)
        if record.memory_end is not None:
            record.rss_samples_kib.append(record.memory_end.rss)
        outer.cancel_scope.cancel()
    # The gateway's idle worker threads (anyio's retire after 10 s idle) still hold their
    # stacks at the end: its memory once the sessions ended is read once they are gone.
    await anyio.sleep(SETTLE_S)  # what the measure is, not a synchronisation
    record.memory_settled = memory_of(run.gateway.proc.pid)
    record.encoders_left = len(encoders_among(running_children(run.gateway.proc.pid)))
    if run.home.env.traced_frames:
        await anyio.to_thread.run_sync(print_growth, run)
    if files:
        lines = profiles.markdown_all(files, record.load_phase_s)
        console.print("\n".join(lines), markup=False)


def print_growth(run: Run) -> None:
    """What grew in the gateway's Python heap from the first session's start to now."""
    lines = memory_trace.report(run.gateway.proc.pid, run.home.root / "debug")
    console.print("\n".join(lines), markup=False)


# --- main -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    counts = (
        ("--agents", DEFAULT_AGENTS, "agents, each with its own MCP server and kiosk session"),
        ("--actions", DEFAULT_ACTIONS, "actions per agent, every 10th a screenshot"),
        ("--scripts", DEFAULT_SCRIPTS, "execute_program calls during the actions"),
        ("--script-clients", DEFAULT_SCRIPT_CLIENTS, "MCP servers the scripts are spread over"),
        ("--think-ms", 0, "each agent's pause between its actions, in ms (0: back to back)"),
        ("--rate", 0, "actions a second across all agents, on a schedule (0: back to back)"),
    )
    for flag, default, text in counts:
        parser.add_argument(flag, type=int, default=default, help=f"{text} ({default})")
    parser.add_argument(
        "--no-recording",
        action="store_true",
        help="sessions without their recording ([recording] enabled = false), to see what "
        "recording costs under the load",
    )
    parser.add_argument(
        "--in-step",
        action="store_true",
        help="every agent at the same place of its cycle of actions and every script "
        "server starting at once (a stress case: each kind of action, and each wave of "
        "containers, falls due everywhere in the same moment)",
    )
    parser.add_argument(
        "--only",
        choices=(*ACTION_TOOLS, IDLE),
        default="",
        help="every action this tool (idle: none sent, the sessions open for as long), for "
        "the cost of one kind of action (bench/action_cost.py)",
    )
    parser.add_argument(
        "--no-confirm-words",
        action="store_true",
        help="agents without the template's confirm words: no click reads its target first",
    )
    parser.add_argument(
        "--summary", metavar="PATH", help="write each tool's latencies and the load as JSON"
    )
    parser.add_argument(
        "--write", metavar="PATH", help="write/replace the results section in this markdown file"
    )
    parser.add_argument(
        "--trace-memory",
        metavar="FRAMES",
        type=int,
        default=0,
        help="run the gateway with CORRAL_TRACEMALLOC=FRAMES (1-64) and print what grew "
        "between the first session's start and the end (slows the gateway: no timings)",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="record py-spy profiles of the gateway and the first agent's MCP server over "
        "the actions into DIR, and print their top frames (py-spy takes CPU: compare "
        "timings with a run without it)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.trace_memory <= 64:
        parser.error("--trace-memory must be from 1 to 64 frames")
    if not 0 <= args.think_ms <= 60_000:
        parser.error("--think-ms must be from 0 to 60000")
    if not 0 <= args.rate <= MAX_RATE:
        parser.error(f"--rate must be from 0 to {MAX_RATE} actions a second")
    if args.rate and args.think_ms:
        parser.error("--rate and --think-ms are two paces: give one of them")
    if args.agents < 1 or args.actions < 1 or args.scripts < 0:
        parser.error("--agents and --actions must be at least 1, --scripts at least 0")
    if args.actions > MAX_ACTIONS:
        parser.error(f"--actions is at most {MAX_ACTIONS} (the session's action budget)")
    if not 1 <= args.script_clients <= MAX_SCRIPT_CLIENTS:
        parser.error(f"--script-clients must be from 1 to {MAX_SCRIPT_CLIENTS}")
    if args.write and (args.only or args.no_confirm_words):
        parser.error("--only and --no-confirm-words runs are not the soak: --write is for the mix")
    return args


def canonical_command(plan: Plan, write: str | None) -> str:
    argv = [".venv/bin/python", "bench/soak.py", "--agents", str(plan.agents)]
    argv += ["--actions", str(plan.actions), "--scripts", str(plan.scripts)]
    if plan.script_clients != DEFAULT_SCRIPT_CLIENTS:
        argv += ["--script-clients", str(plan.script_clients)]
    if plan.think_ms:
        argv += ["--think-ms", str(plan.think_ms)]
    if plan.rate:
        argv += ["--rate", str(plan.rate)]
    if not plan.recording:
        argv += ["--no-recording"]
    if plan.in_step:
        argv += ["--in-step"]
    if write is not None:
        argv += ["--write", write]
    return shlex.join(argv)


def summary(record: Record) -> dict[str, Any]:
    """Each tool's p50 and p95 (ms) and count, the load phase's length and actions a second."""
    tools = {
        tool: {"p50": nearest_rank(ms, 50), "p95": nearest_rank(ms, 95), "n": len(ms)}
        for tool, ms in record.latencies_ms.items()
        if ms
    }
    seconds = record.load_phase_s
    rate = record.actions_ok / seconds if seconds else 0.0
    return {"tools": tools, "load_s": seconds, "actions_per_s": rate, "errors": record.error_count}


def final_check(owners: set[Owner], leaks: Leaks, when: str, idle_pool: int = 0) -> None:
    with sigint_ignored():
        leaks.add(remove_leftovers(sorted(owners), idle_pool), when)


def pool_size(home: CorralHome) -> int:
    """The surfaces the gateway keeps warm in all (its pool members are no leak while it
    runs): what it computes from the same files."""
    config = load_config(home.config_file)
    return sum(anyio.run(wanted_sizes, home, config).values())


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = Plan(
        args.agents,
        args.actions,
        args.scripts,
        min(args.script_clients, args.scripts or 1),
        args.think_ms,
        args.rate,
        not args.no_recording,
        args.only,
        not args.no_confirm_words,
        args.in_step,
    )
    machine = describe_machine()
    record = Record()
    leaks = Leaks()
    me = os.getpid()
    record.owners.add((me, read_start_time(me)))
    interrupted = False
    if args.trace_memory:
        os.environ["CORRAL_TRACEMALLOC"] = str(args.trace_memory)  # the gateway's
    profile = None if args.profile is None else Path(args.profile).resolve()
    with tempfile.TemporaryDirectory(prefix="corral-bench-soak-") as tmp:
        home = CorralHome(Path(tmp).resolve() / "home", env=Environment.from_environ(os.environ))
        port = free_port()
        prepare_home(home, port, plan)
        try:
            with running_gateway(
                home,
                port,
                Path(tmp) / "gateway.log",
                own_session=True,
                while_stopping=sigint_ignored,
            ) as gateway:
                record.owners.add((gateway.proc.pid, gateway.start_time))
                console.print(f"[dim]corral gateway (pid {gateway.proc.pid}) at {gateway.url}[/]")
                try:
                    anyio.run(soak, home, plan, gateway, Path(tmp), record, profile)
                except KeyboardInterrupt:
                    interrupted = True  # sessions still run: the gateway's SIGTERM ends them
                if not interrupted:
                    running = "with the gateway running"
                    final_check(record.owners, leaks, running, pool_size(home))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            final_check(record.owners, leaks, "after the gateway stopped")
    if interrupted:
        console.print(
            "[yellow]interrupted: the gateway is stopped; "
            f"{len(leaks.containers)} container(s) and {len(leaks.networks)} network(s) of "
            "this run were left after it and are now removed[/yellow]"
        )
        for line in [*leaks.containers, *leaks.networks]:
            console.print(f"[yellow]  {escape(line)}[/yellow]")
        return EXIT_INTERRUPTED
    passed = print_report(machine, plan, record, leaks)
    if args.summary is not None:
        Path(args.summary).write_text(json.dumps(summary(record)), encoding="utf-8")
    if args.write is not None:
        section = markdown_section(
            machine, plan, record, leaks, canonical_command(plan, args.write)
        )
        write_section(Path(args.write), plan.section, section)
        console.print(f"wrote the section to {args.write}")
    return 0 if passed else 1


if __name__ == "__main__":
    run_main(main, console)
