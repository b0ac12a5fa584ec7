"""Benchmark: wall time of a `print(1)` script through corral (warm pool and cold), raw
`docker run`, and the host.

Run from the repository root:

    .venv/bin/python bench/execute_program.py [--runs 30] [--write docs/benchmarks.md]

Seven paths, interleaved: WARMUP uncounted rounds, then --runs timed rounds, each round
running every path once in rotating order (so drift in the machine's speed hits them all):

1. corral warm: `sandboxes.script.execute_program` with a runtime from
   `open_runtime(..., warm=True)` (what a `corral mcp` server has: a warm pool of 2);
2. corral warm through MCP: `execute_program` called on `corral mcp` over stdio by the
   MCP SDK's client (the server's own runtime and pool);
3. corral cold: the same with no pool (what `corral run` and `warm = 0` pay);
4. raw docker: `docker run --rm` through the CLI with the same isolation flags;
5. host: `python3 -c 'print(1)'`, no container at all;
6., 7. the two corral paths of 1. and 3. with `runtime = "runsc"` (gVisor).

Before every timed call the warm pools are let settle (full, and the last call's container
removed), so its background work never overlaps a timed call of any path.

Every run's output must be "1", and no corral.managed=true container of this benchmark
(owned by its process, or one of its raw docker runs) may be left at the end; either
failure stops the benchmark with a non-zero exit.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anyio
from _common import (
    BenchError,
    Timings,
    docker_cli,
    markers,
    run_main,
    runs_and_write,
    write_section,
)
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from profiles import child_with
from rich.console import Console
from rich.table import Table

from orchestrator.config import image_name, render_new_agent
from orchestrator.home import CorralHome, Environment
from orchestrator.runtime import Runtime, open_runtime
from sandboxes.script import execute_program
from sandboxes.script_policy import parse_params

CODE = "print(1)"
AGENT = "bench"  # the MCP path's agent: the template, which may run execute_program
FRONT_POOL = 2  # [container.sandbox] warm's default: the pool a `corral mcp` keeps
EXPECTED = "1"
WARMUP = 2
DEFAULT_RUNS = 30
IMAGE = image_name("sandbox", Environment.from_environ(os.environ).image_tag)
MANAGED_LABEL = "corral.managed=true"
SECTION_START, SECTION_END = markers("execute_program")
DIR_PLACEHOLDER = "DIR"

# The isolation flags of `build_script_spec` (sandboxes/script_policy.py), as CLI flags.
DOCKER_FLAGS: tuple[str, ...] = (
    "--network",
    "none",
    "--read-only",
    "--memory",
    "2g",
    "--memory-swap",
    "2g",
    "--pids-limit",
    "256",
    "--cpus",
    "1",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
    "--tmpfs",
    "/tmp:rw,exec,nosuid,nodev,size=64m",
    "--user",
    "1000:1000",
    "--init",
    "--label",
    MANAGED_LABEL,
    "--label",
    "corral.kind=bench",
)

console = Console()


@dataclass(frozen=True, slots=True)
class PathResult(Timings):
    name: str
    samples_ms: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Machine:
    nproc: int
    docker_version: str
    kernel: str
    date: str


def check_output(path: str, run: int, exit_code: int | None, output: str, stderr: str = "") -> None:
    if exit_code != 0 or output.strip() != EXPECTED:
        raise BenchError(
            f"{path} run {run}: expected exit 0 and output {EXPECTED!r}, "
            f"got exit {exit_code} and output {output!r}"
            + (f"; stderr: {stderr.strip()!r}" if stderr.strip() else "")
        )


def managed_containers() -> list[str]:
    """corral containers of this benchmark: owned by this process, or its raw docker runs.
    (The engine may be shared: another live corral's containers are not ours to count.)"""
    found: list[str] = []
    for label in (f"corral.owner.pid={os.getpid()}", "corral.kind=bench"):
        out = docker_cli(
            "ps",
            "-a",
            "--filter",
            f"label={MANAGED_LABEL}",
            "--filter",
            f"label={label}",
            "--format",
            "{{.ID}} {{.Names}} {{.Status}}",
        )
        found += [line for line in out.splitlines() if line.strip()]
    return found


def describe_machine() -> Machine:
    return Machine(
        nproc=len(os.sched_getaffinity(0)),
        docker_version=docker_cli("version", "--format", "{{.Server.Version}}").strip(),
        kernel=f"{platform.system()} {platform.release()} {platform.machine()}",
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )


# --- the three paths ------------------------------------------------------------------

WARM = "corral execute_program, warm pool"
MCP_WARM = "corral execute_program, warm pool, through MCP"
CORRAL = "corral execute_program, cold"
RAW_DOCKER = "raw docker run --rm"
HOST = "host python3 -c"
WARM_RUNSC = "corral execute_program, warm pool, runsc"
CORRAL_RUNSC = "corral execute_program, cold, runsc"
PATH_NAMES = (WARM, MCP_WARM, CORRAL, RAW_DOCKER, HOST, WARM_RUNSC, CORRAL_RUNSC)
RUNSC_CONFIG = '[container.sandbox]\nruntime = "runsc"\n'  # gVisor (docs/security.md)

# One timed call: takes the run index, returns seconds (output already checked).
TimedCall = Callable[[int], Awaitable[float]]


def docker_argv(workspace: str) -> list[str]:
    return [
        "docker",
        "run",
        "--rm",
        *DOCKER_FLAGS,
        "-v",
        f"{workspace}:/workspace:ro",
        IMAGE,
        "python3",
        "-u",
        "/workspace/main.py",
    ]


def host_python() -> str:
    found = shutil.which("python3")
    if found is None:
        raise BenchError("python3 is not on PATH")
    return found


def write_raw_workspace(workspace: Path) -> None:
    # The container runs as 1000:1000: the directory and script must be readable to it.
    workspace.chmod(0o755)
    script = workspace / "main.py"
    script.write_text(CODE + "\n", encoding="utf-8")
    script.chmod(0o644)


def time_subprocess(name: str, argv: Sequence[str], run: int) -> float:
    """Run `argv` once (blocking, in a worker thread); return its wall time in seconds."""
    started = time.perf_counter()
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    check_output(name, run, done.returncode, done.stdout, done.stderr)
    return elapsed


def subprocess_call(name: str, argv: Sequence[str]) -> TimedCall:
    async def call(run: int) -> float:
        # The thread hand-off happens outside the timed span.
        return await anyio.to_thread.run_sync(time_subprocess, name, argv, run)

    return call


def corral_call(name: str, runtime: Runtime) -> TimedCall:
    params = parse_params({"code": CODE})
    ctx = runtime.script_context("bench")

    async def call(run: int) -> float:
        started = time.perf_counter()
        result = await execute_program(params, ctx)
        elapsed = time.perf_counter() - started
        if not result.sandboxed:
            raise BenchError(f"{name} run {run}: the script ran unsandboxed")
        warm = runtime.audit.read()[-1]["details"]["warm"]
        if warm is not (runtime.pool is not None):
            raise BenchError(f"{name} run {run}: expected warm={runtime.pool is not None}")
        check_output(name, run, result.exit_code, result.output)
        return elapsed

    return call


def mcp_call(client: Client) -> TimedCall:
    """execute_program through `corral mcp` (its own runtime and warm pool) over stdio."""

    async def call(run: int) -> float:
        started = time.perf_counter()
        result = await client.call_tool("execute_program", {"code": CODE})
        elapsed = time.perf_counter() - started
        data = result.structured_content or {}
        if result.is_error or data.get("sandboxed") is not True:
            raise BenchError(f"{MCP_WARM} run {run}: {result.content}"[:400])
        check_output(MCP_WARM, run, data.get("exit_code"), str(data.get("output", "")))
        return elapsed

    return call


async def settle_front(pid: int, size: int) -> None:
    """Wait (polled, bounded) until the MCP server `pid` holds exactly its pool, running:
    the last call's container removed and the refill started."""
    with anyio.fail_after(60):
        while True:
            listed = await anyio.to_thread.run_sync(owned_states, pid)
            if len(listed) == size and all(state == "running" for state in listed):
                return
            await anyio.sleep(0.02)


def owned_states(pid: int) -> list[str]:
    out = docker_cli(
        "ps", "-a", "--filter", f"label=corral.owner.pid={pid}", "--format", "{{.State}}"
    )
    return out.split()


def front_params(home: CorralHome) -> StdioServerParameters:
    """`corral mcp --agent bench` in `home`, whose agent file the caller wrote."""
    corral = Path(sys.executable).parent / "corral"
    env = {**os.environ, "CORRAL_HOME": str(home.root)}
    return StdioServerParameters(command=str(corral), args=["mcp", "--agent", AGENT], env=env)


async def settle(runtime: Runtime) -> None:
    """Wait (polled, bounded) until the pool is full and holds every container of its
    owner: no refill or removal is under way."""
    pool = runtime.pool
    assert pool is not None
    mine = {"corral.instance": runtime.owner.instance_id}
    with anyio.fail_after(60):
        while True:
            idle = pool.idle_ids()
            if len(idle) == pool.settings.size:
                listed = {c.id for c in await runtime.backend.list_managed(mine)}
                if listed == idle:
                    return
            await anyio.sleep(0.02)


async def interleaved_samples(
    home: CorralHome, runsc_home: CorralHome, raw_workspace: Path, runs: int
) -> dict[str, list[float]]:
    """WARMUP + `runs` rounds; each round runs every path once, in rotating order."""
    samples: dict[str, list[float]] = {name: [] for name in PATH_NAMES}
    async with (
        open_runtime(home) as cold,
        open_runtime(home, warm=True) as warm,
        open_runtime(runsc_home) as cold_runsc,
        open_runtime(runsc_home, warm=True) as warm_runsc,
        Client(front_params(home), mode="legacy") as front,
    ):
        front_pid = child_with(AGENT)
        calls: dict[str, TimedCall] = {
            WARM: corral_call(WARM, warm),
            MCP_WARM: mcp_call(front),
            CORRAL: corral_call(CORRAL, cold),
            RAW_DOCKER: subprocess_call(RAW_DOCKER, docker_argv(str(raw_workspace))),
            HOST: subprocess_call(HOST, [host_python(), "-c", CODE]),
            WARM_RUNSC: corral_call(WARM_RUNSC, warm_runsc),
            CORRAL_RUNSC: corral_call(CORRAL_RUNSC, cold_runsc),
        }
        for run in range(WARMUP + runs):
            shift = run % len(PATH_NAMES)
            for name in PATH_NAMES[shift:] + PATH_NAMES[:shift]:
                await settle(warm)
                await settle(warm_runsc)
                await settle_front(front_pid, FRONT_POOL)
                elapsed = await calls[name](run)
                if run >= WARMUP:
                    samples[name].append(elapsed * 1000)
    return samples


def run_benchmark(runs: int) -> list[PathResult]:
    console.print(
        f"[dim]{WARMUP} warm-up + {runs} timed rounds; each round runs "
        f"{', '.join(PATH_NAMES)} once, in rotating order...[/dim]"
    )
    with (
        tempfile.TemporaryDirectory(prefix="corral-bench-home-") as home_dir,
        tempfile.TemporaryDirectory(prefix="corral-bench-raw-") as raw_dir,
        tempfile.TemporaryDirectory(prefix="corral-bench-runsc-") as runsc_dir,
    ):
        # A throwaway CORRAL_HOME: default config, its own audit log and work dir.
        home = CorralHome(Path(home_dir).resolve(), env=Environment.from_environ(os.environ))
        agent = home.agent_file(AGENT)
        agent.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        agent.write_text(render_new_agent(AGENT), encoding="utf-8")  # execute_program on
        raw_workspace = Path(raw_dir).resolve()
        write_raw_workspace(raw_workspace)
        runsc_home = CorralHome(Path(runsc_dir).resolve(), env=Environment.from_environ(os.environ))
        runsc_home.root.mkdir(parents=True, exist_ok=True)
        runsc_home.config_file.write_text(RUNSC_CONFIG, encoding="utf-8")
        samples = anyio.run(interleaved_samples, home, runsc_home, raw_workspace, runs)
    return [PathResult(name, tuple(samples[name])) for name in PATH_NAMES]


# --- reporting ------------------------------------------------------------------------


def ratio(result: PathResult, baseline: PathResult) -> str:
    return f"{result.p50 / baseline.p50:.2f}x"


def table_rows(results: Sequence[PathResult], baseline: PathResult) -> list[list[str]]:
    host = results[PATH_NAMES.index(HOST)]
    return [
        [
            r.name,
            str(len(r.samples_ms)),
            f"{r.p50:.1f}",
            f"{r.p95:.1f}",
            f"{r.minimum:.1f}",
            ratio(r, baseline),
            ratio(r, host),
        ]
        for r in results
    ]


HEADERS = ("path", "runs", "p50 ms", "p95 ms", "min ms", "vs raw docker", "vs host")


def print_report(machine: Machine, results: Sequence[PathResult], baseline: PathResult) -> None:
    table = Table(title=f"execute_program: {CODE!r} wall time")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i == 0 else "right")
    for row in table_rows(results, baseline):
        table.add_row(*row)
    console.print()
    console.print(
        f"machine: nproc={machine.nproc}, Docker server {machine.docker_version}, "
        f"{machine.kernel}; date: {machine.date}"
    )
    console.print(table)
    console.print(
        "[dim]p50/p95: nearest-rank percentiles; 'vs raw docker' and 'vs host' are ratios "
        "of p50s.[/dim]"
    )


def markdown_table(results: Sequence[PathResult], baseline: PathResult) -> str:
    lines = [
        "| " + " | ".join(HEADERS) + " |",
        "|---|" + "---:|" * (len(HEADERS) - 1),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(results, baseline)]
    return "\n".join(lines)


def markdown_section(
    machine: Machine, results: Sequence[PathResult], baseline: PathResult, command: str
) -> str:
    runs = len(baseline.samples_ms)
    raw = shlex.join(docker_argv(DIR_PLACEHOLDER))
    return f"""{SECTION_START}
## execute_program: `{CODE}` wall time

Wall time of one `{CODE}` Python script as the caller sees it, seven ways. The paths are
interleaved: {WARMUP} warm-up rounds (not counted), then {runs} timed rounds, each round running
every path once in rotating order, so drift in the machine's speed during the run hits all
seven alike. Before every timed call (of any path) the warm pool is let settle: full, and the
previous warm call's container removed, so no background work overlaps a timed call.

- **corral execute_program, warm pool**: `sandboxes.script.execute_program` with a runtime
  from `orchestrator.runtime.open_runtime(home, warm=True)` and the default
  `[container.sandbox] warm = 2` (what a `corral mcp` server has), every call in one process
  and one event loop, each call timed with `time.perf_counter`. Per call corral takes a
  slot, claims a pre-created container (asking the engine, side by side, whether it still
  runs and the image's current id), writes the script into its workspace, sends the line
  that starts it, reads the output, waits for the exit and audits the run; the exited
  container is removed, and the pool refilled, in the background after the call returns.
  Each call must be audited `warm: true`.
- **corral execute_program, warm pool, through MCP**: what an agent sees: the MCP Python
  SDK's client calls `execute_program` on `corral mcp --agent {AGENT}` over stdio (the
  rendered agent template), whose own runtime keeps the same pool of {FRONT_POOL}; before each
  timed call its pool is let settle too (exactly its {FRONT_POOL} containers, running).
- **corral execute_program, cold**: the same with no pool (`corral run`, or `warm = 0`):
  per call corral checks the engine and image, writes the script to a private workspace,
  creates, attaches, starts, waits for and removes the container (in-container `timeout`
  hard cap, stderr merged into stdout), and audits the run. The container is created with
  the engine's network stack left out (`NetworkDisabled`, with `--network none`'s own
  loopback-only namespace), which the docker CLI has no flag for: about 100 ms of the
  engine's CPU less per container than the raw row below.
- **raw docker run --rm**: the docker CLI (started afresh each run, which is part of the
  time) with the same isolation flags, `{DIR_PLACEHOLDER}` being a directory holding `main.py`:

  ```sh
  {raw}
  ```

- **host python3 -c**: `python3 -c '{CODE}'` on the host, no container.
- **… runsc**: the two corral paths again with `[container.sandbox] runtime = "runsc"`:
  the same spec run by gVisor (Debian's `runsc`, ptrace platform, registered with the
  engine by scripts/dockerd.json). No target; the price of the stronger boundary.

p50 and p95 are nearest-rank percentiles (the ⌈p/100 · n⌉-th smallest of the n samples);
"vs raw docker" and "vs host" are each path's p50 divided by raw docker's and by the host's.
Targets (issue 14): warm ≤ 1.5x host, cold ≤ 1.00x raw docker.

Command (from the repository root):

```sh
{command}
```

Machine: {machine.nproc} CPUs (`nproc`), Docker server {machine.docker_version},
{machine.kernel}. Run on {machine.date}.

{markdown_table(results, baseline)}
{SECTION_END}"""


# --- main -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return runs_and_write(argv, __doc__, DEFAULT_RUNS, f"timed runs per path ({DEFAULT_RUNS})")


def canonical_command(runs: int, write: str | None) -> str:
    argv = [".venv/bin/python", "bench/execute_program.py", "--runs", str(runs)]
    if write is not None:
        argv += ["--write", write]
    return shlex.join(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs: int = args.runs
    before = managed_containers()
    if before:
        raise BenchError(
            "containers labelled corral.managed=true exist before the benchmark, so its "
            "leak check would be meaningless; remove them first:\n  " + "\n  ".join(before)
        )
    machine = describe_machine()
    results = run_benchmark(runs)
    baseline = results[PATH_NAMES.index(RAW_DOCKER)]
    print_report(machine, results, baseline)
    # The leak check comes before --write: figures from a run that leaks are not published.
    left = managed_containers()
    if left:
        raise BenchError(
            "containers labelled corral.managed=true were left behind:\n  " + "\n  ".join(left)
        )
    console.print("no corral.managed=true container left behind")
    if args.write is not None:
        section = markdown_section(machine, results, baseline, canonical_command(runs, args.write))
        write_section(Path(args.write), "execute_program", section)
        console.print(f"wrote the section to {args.write}")
    return 0


if __name__ == "__main__":
    run_main(main, console)
