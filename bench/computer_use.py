"""Benchmark: computer_* round trips through corral's MCP front, against the reference way.

Run from the repository root:

    .venv/bin/python bench/computer_use.py [--runs 30] [--starts 5] [--write docs/benchmarks.md]

corral (the real path): a throwaway CORRAL_HOME whose config.toml puts `[gateway] port` on a
free port, an agent "bench" with `computer_use = true` and no allowed_domains (so its
session has no network), `corral gateway` started as a subprocess, and `corral mcp --agent
bench` reached over stdio by the 2.x SDK's `Client(..., mode="legacy")`.

The reference (what other computer-use implementations do): a kiosk container with the
same image and hardening as corral's, driven by a fresh `docker exec` per action:
`python3 -c` (Xlib get_image + Pillow PNG on stdout) for a screenshot, `xdotool mousemove X
Y click 1` for a click. The same container is also driven through corral's raw kiosk
channel (orchestrator.kiosk.KioskChannel: JSON lines on the attached stdin/stdout, no MCP,
no gateway), which shows what MCP + the gateway add.

Measured, p50/p95/min in ms:

1. session start to first screenshot (`computer_session_start` + `computer_screenshot`;
   for the kiosk channel: create/attach/start the container, op `start`, op `screenshot`);
2. screenshot round trip at 1280x800;
3. click round trip at (640, 400).

Steady-state rounds are interleaved: WARMUP uncounted rounds, then --runs timed rounds,
each running every (operation, path) once, paths in rotating order.

Every container this script or its gateway starts is removed at the end; the script fails
if one is left (only containers whose owner is this process or its gateway are looked at:
other people's containers on the same engine are never touched).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import platform
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
from _common import BenchError, Timings, docker_cli, markers, nearest_rank, run_main, write_section
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rich.console import Console
from rich.table import Table

from orchestrator.config import AgentConfig, KioskConfig, load_config, render_new_agent
from orchestrator.docker_backend import DockerBackend
from orchestrator.home import CorralHome
from orchestrator.kiosk import KioskChannel, load_seccomp
from orchestrator.owner import LABEL_MANAGED, LABEL_OWNER_PID, LABEL_OWNER_START, Owner
from orchestrator.owner import read_start_time as owner_start_time
from sandboxes.isolation import kiosk_spec
from sandboxes.ports import ContainerSpec

SECTION = "computer_use"
SECTION_START, SECTION_END = markers(SECTION)

REPO = Path(__file__).resolve().parents[1]
CORRAL_BIN = REPO / ".venv" / "bin" / "corral"

AGENT = "bench"
WIDTH, HEIGHT = 1280, 800
CLICK_X, CLICK_Y = 640, 400
DISPLAY = ":99"  # the kiosk agent's Xvfb display
WARMUP = 2
START_WARMUP = 1
DEFAULT_RUNS = 30
DEFAULT_STARTS = 5
MAX_ACTIONS = 10_000  # the session budget: clicks must not be refused mid-run
CLICK_TARGET_MS = 30.0
SCREENSHOT_TARGET_MS = 100.0

GATEWAY_READY_S = 30.0
GATEWAY_STOP_S = 30.0
CALL_TIMEOUT_S = 120.0
KIOSK_START_DEADLINE_S = 60.0
KIOSK_ACTION_DEADLINE_S = 10.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# The reference screenshot: one fresh process per screenshot, the same grab and the same
# PNG encoder settings as the kiosk agent (rig_images/kiosk/kiosk_agent/screen.py `grab_png`),
# so the difference measured is the path, not the encoder.
SHOT_PY = """\
import io, sys
from PIL import Image
from Xlib import X, display
d = display.Display()
root = d.screen().root
g = root.get_geometry()
raw = root.get_image(0, 0, g.width, g.height, X.ZPixmap, 0xFFFFFFFF)
img = Image.frombuffer("RGB", (g.width, g.height), raw.data, "raw", "BGRX", 0, 1)
buf = io.BytesIO()
img.save(buf, "PNG", compress_level=1)
sys.stdout.buffer.write(buf.getvalue())
"""

# The table is ~110 columns wide: do not squeeze it into 80 when the output is a log.
console = Console(width=None if sys.stdout.isatty() else 120)


# --- rows and statistics --------------------------------------------------------------

START = "start + 1st screenshot"
SHOT = f"screenshot {WIDTH}x{HEIGHT}"
CLICK = "click"

MCP = "corral MCP"
CHANNEL = "kiosk channel"
EXEC_SHOT = "docker exec python3"
EXEC_CLICK = "docker exec xdotool"


@dataclass(frozen=True, slots=True)
class Row:
    operation: str
    path: str
    reference: bool = False
    target_ms: float | None = None


ROWS: tuple[Row, ...] = (
    Row(START, MCP),
    Row(START, CHANNEL, reference=True),
    Row(SHOT, MCP, target_ms=SCREENSHOT_TARGET_MS),
    Row(SHOT, CHANNEL),
    Row(SHOT, EXEC_SHOT, reference=True),
    Row(CLICK, MCP, target_ms=CLICK_TARGET_MS),
    Row(CLICK, CHANNEL),
    Row(CLICK, EXEC_CLICK, reference=True),
)
RowKey = tuple[str, str]


def key(row: Row) -> RowKey:
    return (row.operation, row.path)


@dataclass(frozen=True, slots=True)
class Result(Timings):
    row: Row
    samples_ms: tuple[float, ...]

    @property
    def met(self) -> bool | None:
        if self.row.target_ms is None:
            return None
        return self.p50 < self.row.target_ms


@dataclass
class Observations:
    """What the calls returned, besides their times (reported under the table)."""

    mcp_png_bytes: list[int] = field(default_factory=list)
    channel_png_bytes: list[int] = field(default_factory=list)
    exec_png_bytes: list[int] = field(default_factory=list)
    mcp_masked: list[bool] = field(default_factory=list)
    mask_notes: set[str] = field(default_factory=set)
    kiosk_start_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Machine:
    nproc: int
    docker_version: str
    kernel: str
    date: str
    others_running: int


# --- small helpers --------------------------------------------------------------------


def describe_machine() -> Machine:
    running = docker_cli("ps", "-q").split()
    return Machine(
        nproc=len(os.sched_getaffinity(0)),
        docker_version=docker_cli("version", "--format", "{{.Server.Version}}").strip(),
        kernel=f"{platform.system()} {platform.release()} {platform.machine()}",
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        others_running=len(running),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def png_size(data: bytes, what: str) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk; BenchError if `data` is not a PNG."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise BenchError(f"{what}: not a PNG ({len(data)} bytes, starts {data[:16]!r})")
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def check_png(data: bytes, what: str) -> int:
    size = png_size(data, what)
    if size != (WIDTH, HEIGHT):
        raise BenchError(f"{what}: a {size[0]}x{size[1]} PNG, expected {WIDTH}x{HEIGHT}")
    return len(data)


def result_text(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


def check_call(tool: str, result: types.CallToolResult) -> types.CallToolResult:
    if result.is_error:
        raise BenchError(f"{tool} failed: {result_text(result)}")
    return result


def screenshot_png(result: types.CallToolResult, obs: Observations) -> bytes:
    images = [b for b in result.content if isinstance(b, types.ImageContent)]
    if len(images) != 1 or images[0].mime_type != "image/png":
        raise BenchError(f"computer_screenshot: expected one PNG image, got {result.content!r}")
    structured = result.structured_content or {}
    masked = bool(structured.get("masked"))
    obs.mcp_masked.append(masked)
    if masked:
        obs.mask_notes.add(result_text(result))
    return base64.b64decode(images[0].data)


# --- the CORRAL_HOME and the gateway --------------------------------------------------


def agent_toml() -> str:
    """The rendered template with computer_use on and a large action budget."""
    replacements = {"computer_use": "true", "max_actions": str(MAX_ACTIONS)}
    lines = render_new_agent(AGENT).splitlines()
    for name, value in replacements.items():
        hits = [i for i, line in enumerate(lines) if line.split("=")[0].strip() == name]
        if len(hits) != 1:
            raise BenchError(f"the agent template has {len(hits)} `{name} = ...` lines, not 1")
        lines[hits[0]] = f"{name} = {value}"
    text = "\n".join(lines) + "\n"
    cfg = AgentConfig.model_validate(tomllib.loads(text)).capabilities
    if not cfg.computer_use or cfg.computer_use_config.max_actions != MAX_ACTIONS:
        raise BenchError("the rewritten agent.toml does not say what the benchmark needs")
    return text


def prepare_home(home: CorralHome, port: int) -> None:
    home.ensure()
    home.config_file.write_text(f"[gateway]\nport = {port}\n", encoding="utf-8")
    if load_config(home.config_file).gateway.port != port:
        raise BenchError("config.toml does not carry the gateway port")
    path = home.agent_file(AGENT)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(agent_toml(), encoding="utf-8")


def corral_env(home: CorralHome) -> dict[str, str]:
    env = dict(os.environ)
    env["CORRAL_HOME"] = str(home.root)
    return env


def corral_bin() -> str:
    if not CORRAL_BIN.exists():
        raise BenchError(f"{CORRAL_BIN} does not exist; install the project into .venv first")
    return str(CORRAL_BIN)


@dataclass
class Gateway:
    proc: subprocess.Popen[bytes]
    start_time: int | None
    url: str
    log_path: Path

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        except OSError:
            return ""


def wait_healthy(gateway: Gateway) -> None:
    deadline = time.monotonic() + GATEWAY_READY_S
    with httpx.Client(trust_env=False, timeout=2.0) as client:
        while True:
            if gateway.proc.poll() is not None:
                raise BenchError(
                    f"corral gateway exited with {gateway.proc.returncode}: {gateway.log_tail()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if client.get(gateway.url + "/healthz").status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise BenchError(
                    f"corral gateway did not answer /healthz within {GATEWAY_READY_S:g} s: "
                    f"{gateway.log_tail()}"
                )
            time.sleep(0.05)  # polling the health endpoint, not a sleep-sync


@contextlib.contextmanager
def running_gateway(home: CorralHome, port: int, log_path: Path) -> Iterator[Gateway]:
    """`corral gateway` on `port`, healthy; SIGTERM and wait on exit (SIGKILL if stuck)."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [corral_bin(), "gateway"],
            env=corral_env(home),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    gateway = Gateway(proc, owner_start_time(proc.pid), f"http://127.0.0.1:{port}", log_path)
    try:
        wait_healthy(gateway)
        yield gateway
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=GATEWAY_STOP_S)
        except subprocess.TimeoutExpired:
            console.print("[yellow]the gateway ignored SIGTERM; killing it[/yellow]")
            proc.kill()
            proc.wait()


# --- the three paths ------------------------------------------------------------------

# One timed call: takes the run index, returns seconds (the answer already checked).
TimedCall = Callable[[int], Awaitable[float]]


@dataclass
class McpPath:
    client: Client
    obs: Observations
    session_open: bool = False

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await self.client.call_tool(tool, arguments)

    async def start_to_screenshot(self, run: int) -> float:
        started = time.perf_counter()
        start = await self.call("computer_session_start", {"width": WIDTH, "height": HEIGHT})
        shot = await self.call("computer_screenshot", {})
        elapsed = time.perf_counter() - started
        self.session_open = not start.is_error
        check_call("computer_session_start", start)
        check_png(screenshot_png(check_call("computer_screenshot", shot), self.obs), "MCP")
        await self.stop()
        return elapsed

    async def start(self) -> None:
        result = await self.call("computer_session_start", {"width": WIDTH, "height": HEIGHT})
        self.session_open = not result.is_error
        check_call("computer_session_start", result)

    async def stop(self) -> None:
        if self.session_open:
            self.session_open = False
            check_call("computer_session_stop", await self.call("computer_session_stop", {}))

    async def screenshot(self, run: int) -> float:
        started = time.perf_counter()
        result = await self.call("computer_screenshot", {})
        elapsed = time.perf_counter() - started
        png = screenshot_png(check_call("computer_screenshot", result), self.obs)
        self.obs.mcp_png_bytes.append(check_png(png, f"MCP screenshot run {run}"))
        return elapsed

    async def click(self, run: int) -> float:
        started = time.perf_counter()
        result = await self.call("computer_click", {"x": CLICK_X, "y": CLICK_Y})
        elapsed = time.perf_counter() - started
        check_call("computer_click", result)
        return elapsed


def reference_spec(backend: DockerBackend) -> ContainerSpec:
    """The kiosk container as the gateway creates one for a session without network (default
    image, same hardening, this process as its owner)."""
    return kiosk_spec(
        image=KioskConfig().image,
        labels=backend.labels(kind="bench-kiosk", agent=AGENT, session="reference"),
        network=None,
        seccomp=load_seccomp(),
    )


@asynccontextmanager
async def started_kiosk(backend: DockerBackend, obs: Observations) -> AsyncIterator[KioskChannel]:
    channel = await KioskChannel.open(backend, reference_spec(backend))
    try:
        ready = await channel.request(
            "start",
            KIOSK_START_DEADLINE_S,
            width=WIDTH,
            height=HEIGHT,
            proxy=None,
            ca_pem=None,
            url=None,
        )
        obs.kiosk_start_ms.append(float(ready.get("ms", 0.0)))
        yield channel
    finally:
        await channel.close()


@dataclass
class ChannelPath:
    backend: DockerBackend
    obs: Observations
    channel: KioskChannel | None = None

    def _channel(self) -> KioskChannel:
        if self.channel is None:
            raise BenchError("the reference kiosk is not started")
        return self.channel

    async def start_to_screenshot(self, run: int) -> float:
        started = time.perf_counter()
        async with started_kiosk(self.backend, self.obs) as channel:
            shot = await channel.request("screenshot", KIOSK_ACTION_DEADLINE_S)
            elapsed = time.perf_counter() - started
            check_png(base64.b64decode(shot["png"]), f"channel start run {run}")
        return elapsed

    async def screenshot(self, run: int) -> float:
        started = time.perf_counter()
        shot = await self._channel().request("screenshot", KIOSK_ACTION_DEADLINE_S)
        elapsed = time.perf_counter() - started
        png = base64.b64decode(shot["png"])
        self.obs.channel_png_bytes.append(check_png(png, f"channel screenshot run {run}"))
        return elapsed

    async def click(self, run: int) -> float:
        started = time.perf_counter()
        await self._channel().request(
            "click", KIOSK_ACTION_DEADLINE_S, x=CLICK_X, y=CLICK_Y, button="left", double=False
        )
        return time.perf_counter() - started


def exec_screenshot_argv(container_id: str) -> list[str]:
    return ["docker", "exec", "-e", f"DISPLAY={DISPLAY}", container_id, "python3", "-c", SHOT_PY]


def exec_click_argv(container_id: str) -> list[str]:
    return [
        "docker",
        "exec",
        "-e",
        f"DISPLAY={DISPLAY}",
        container_id,
        "xdotool",
        "mousemove",
        str(CLICK_X),
        str(CLICK_Y),
        "click",
        "1",
    ]


def run_timed(argv: Sequence[str], what: str) -> tuple[float, bytes]:
    """Run `argv` once (blocking, in a worker thread); its wall time and stdout."""
    started = time.perf_counter()
    done = subprocess.run(list(argv), capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(
            f"{what}: exit {done.returncode}: {done.stderr.decode(errors='replace').strip()}"
        )
    return elapsed, done.stdout


@dataclass
class ExecPath:
    obs: Observations
    container_id: str = ""

    async def screenshot(self, run: int) -> float:
        what = f"docker exec screenshot run {run}"
        # The thread hand-off happens outside the timed span.
        elapsed, out = await anyio.to_thread.run_sync(
            run_timed, exec_screenshot_argv(self.container_id), what
        )
        self.obs.exec_png_bytes.append(check_png(out, what))
        return elapsed

    async def click(self, run: int) -> float:
        what = f"docker exec xdotool run {run}"
        elapsed, _ = await anyio.to_thread.run_sync(
            run_timed, exec_click_argv(self.container_id), what
        )
        return elapsed


# --- measuring ------------------------------------------------------------------------


async def rounds(
    calls: dict[RowKey, TimedCall],
    groups: Sequence[Sequence[RowKey]],
    warmup: int,
    runs: int,
    samples: dict[RowKey, list[float]],
) -> None:
    """`warmup` + `runs` rounds; each round runs every call of every group once, each group's
    calls in rotating order (so drift in the machine's speed hits every path alike)."""
    for run in range(warmup + runs):
        for group in groups:
            shift = run % len(group)
            for row_key in [*group[shift:], *group[:shift]]:
                elapsed = await calls[row_key](run)
                if run >= warmup:
                    samples[row_key].append(elapsed * 1000)


async def measure(home: CorralHome, runs: int, starts: int, obs: Observations) -> list[Result]:
    samples: dict[RowKey, list[float]] = {key(row): [] for row in ROWS}
    params = StdioServerParameters(
        command=corral_bin(), args=["mcp", "--agent", AGENT], env=corral_env(home)
    )
    backend = DockerBackend(Owner.current())
    try:
        async with Client(params, mode="legacy") as client:
            mcp = McpPath(client, obs)
            channel = ChannelPath(backend, obs)
            reference = ExecPath(obs)
            console.print(
                f"[dim]{START_WARMUP} warm-up + {starts} timed session starts per path...[/dim]"
            )
            await rounds(
                {
                    (START, MCP): mcp.start_to_screenshot,
                    (START, CHANNEL): channel.start_to_screenshot,
                },
                [[(START, MCP), (START, CHANNEL)]],
                START_WARMUP,
                starts,
                samples,
            )
            console.print(
                f"[dim]{WARMUP} warm-up + {runs} timed rounds of screenshot and click, "
                "every path once per round, in rotating order...[/dim]"
            )
            await mcp.start()
            try:
                async with started_kiosk(backend, obs) as kiosk:
                    channel.channel = kiosk
                    reference.container_id = kiosk.id
                    await rounds(
                        {
                            (SHOT, MCP): mcp.screenshot,
                            (SHOT, CHANNEL): channel.screenshot,
                            (SHOT, EXEC_SHOT): reference.screenshot,
                            (CLICK, MCP): mcp.click,
                            (CLICK, CHANNEL): channel.click,
                            (CLICK, EXEC_CLICK): reference.click,
                        },
                        [
                            [(SHOT, MCP), (SHOT, CHANNEL), (SHOT, EXEC_SHOT)],
                            [(CLICK, MCP), (CLICK, CHANNEL), (CLICK, EXEC_CLICK)],
                        ],
                        WARMUP,
                        runs,
                        samples,
                    )
                    channel.channel = None
            except BaseException:
                # Best effort: the first failure is the one to report, and stopping the
                # gateway ends the session anyway.
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await mcp.stop()
                raise
            await mcp.stop()
    finally:
        with anyio.CancelScope(shield=True):
            await backend.close()
    return [Result(row, tuple(samples[key(row)])) for row in ROWS]


# --- leftovers ------------------------------------------------------------------------


def owned_containers(owners: Sequence[tuple[int, int | None]]) -> list[str]:
    """IDs of corral containers whose owner label is one of `owners` (pid, start time)."""
    found: list[str] = []
    for pid, start in owners:
        filters = ["--filter", f"label={LABEL_MANAGED}=true"]
        filters += ["--filter", f"label={LABEL_OWNER_PID}={pid}"]
        if start is not None:
            filters += ["--filter", f"label={LABEL_OWNER_START}={start}"]
        out = docker_cli("ps", "-a", *filters, "--format", "{{.ID}} {{.Names}} {{.Status}}")
        found += [line for line in out.splitlines() if line.strip()]
    return found


def check_leftovers(owners: Sequence[tuple[int, int | None]]) -> None:
    left = owned_containers(owners)
    if not left:
        return
    for line in left:  # ours (this process's or our gateway's): remove them, then fail
        subprocess.run(["docker", "rm", "-f", line.split()[0]], capture_output=True, check=False)
    raise BenchError(
        "containers of this benchmark (or its gateway) were left behind and are now removed:\n  "
        + "\n  ".join(left)
    )


# --- reporting ------------------------------------------------------------------------

HEADERS = ("operation", "path", "runs", "p50 ms", "p95 ms", "min ms", "vs ref", "target p50")


def reference_of(result: Result, results: Sequence[Result]) -> Result:
    for other in results:
        if other.row.operation == result.row.operation and other.row.reference:
            return other
    raise BenchError(f"no reference row for {result.row.operation}")


def target_cell(result: Result) -> str:
    if result.row.target_ms is None:
        return ""
    verdict = "PASS" if result.met else "MISS"
    return f"{verdict} (<{result.row.target_ms:g})"


def table_rows(results: Sequence[Result]) -> list[list[str]]:
    rows = []
    for r in results:
        ref = reference_of(r, results)
        rows.append(
            [
                r.row.operation,
                r.row.path + (" (ref)" if r.row.reference else ""),
                str(len(r.samples_ms)),
                f"{r.p50:.1f}",
                f"{r.p95:.1f}",
                f"{r.minimum:.1f}",
                f"{r.p50 / ref.p50:.2f}x",
                target_cell(r),
            ]
        )
    return rows


def median(values: Sequence[float]) -> float:
    return nearest_rank(values, 50) if values else float("nan")


def notes(results: Sequence[Result], obs: Observations) -> list[str]:
    by_key = {key(r.row): r for r in results}
    lines = [
        f"MCP + gateway over the raw kiosk channel, p50: screenshot "
        f"+{by_key[(SHOT, MCP)].p50 - by_key[(SHOT, CHANNEL)].p50:.1f} ms, click "
        f"+{by_key[(CLICK, MCP)].p50 - by_key[(CLICK, CHANNEL)].p50:.1f} ms.",
        f"PNG sizes (median bytes): MCP {median(obs.mcp_png_bytes):.0f}, kiosk channel "
        f"{median(obs.channel_png_bytes):.0f}, docker exec {median(obs.exec_png_bytes):.0f}.",
        f"Kiosk agent `start` op (Xvfb + D-Bus + Chromium, as the agent reports it), median: "
        f"{median(obs.kiosk_start_ms):.0f} ms.",
    ]
    masked = sum(obs.mcp_masked)
    if masked:
        lines.append(
            f"{masked} of {len(obs.mcp_masked)} MCP screenshots came back fully masked: "
            + " | ".join(sorted(obs.mask_notes))[:400]
        )
    else:
        lines.append(f"None of the {len(obs.mcp_masked)} MCP screenshots was masked.")
    return lines


def print_report(machine: Machine, results: Sequence[Result], obs: Observations) -> None:
    table = Table(title=f"computer_use round trips ({WIDTH}x{HEIGHT}, about:blank, no network)")
    for i, header in enumerate(HEADERS):
        left = i < 2 or i == len(HEADERS) - 1
        table.add_column(header, justify="left" if left else "right", no_wrap=True)
    for result, row in zip(results, table_rows(results), strict=True):
        cells = list(row)
        if result.met is not None:
            colour = "green" if result.met else "red"
            cells[-1] = f"[{colour}]{cells[-1]}[/{colour}]"
        table.add_row(*cells)
    console.print()
    console.print(
        f"machine: nproc={machine.nproc}, Docker server {machine.docker_version}, "
        f"{machine.kernel}; {machine.others_running} container(s) running on the engine at "
        f"the start; date: {machine.date}"
    )
    console.print(table)
    console.print(
        "[dim]p50/p95: nearest-rank percentiles; 'vs ref' is the ratio of p50s to the "
        "operation's (ref) row.[/dim]"
    )
    for line in notes(results, obs):
        console.print(f"[dim]{line}[/dim]")


def markdown_table(results: Sequence[Result]) -> str:
    lines = [
        "| " + " | ".join(HEADERS) + " |",
        "|---|---|" + "---:|" * (len(HEADERS) - 3) + "---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(results)]
    return "\n".join(lines)


def targets_paragraph(results: Sequence[Result]) -> str:
    parts = []
    for r in results:
        if r.row.target_ms is None:
            continue
        verdict = "met" if r.met else "**missed**"
        parts.append(
            f"{r.row.operation} through MCP under {r.row.target_ms:g} ms p50: {verdict} "
            f"({r.p50:.1f} ms)"
        )
    return "; ".join(parts) + "."


def markdown_section(
    machine: Machine, results: Sequence[Result], obs: Observations, runs: int, command: str
) -> str:
    starts = len(results[0].samples_ms)
    shot = shlex.join(exec_screenshot_argv("ID")[:-1]) + ' "$SHOT_PY"'
    click = shlex.join(exec_click_argv("ID"))
    indented_shot_py = "\n".join(f"  {line}" for line in ["# SHOT_PY", *SHOT_PY.splitlines()])
    extra = "\n".join(f"- {line}" for line in notes(results, obs))
    return f"""{SECTION_START}
## computer_use: screenshot and click round trips

How long an agent waits for a kiosk action, corral's way against the way other computer-use
implementations drive a desktop container. Every figure is wall time as the caller sees it
(`time.perf_counter` around the call), the page being `about:blank` at {WIDTH}x{HEIGHT} in a
session without network.

- **corral MCP**: the real path. A throwaway `CORRAL_HOME` whose `config.toml` sets
  `[gateway] port` to a free port; agent `{AGENT}` is the rendered template with
  `computer_use = true` and `[capabilities.computer_use_config] max_actions = {MAX_ACTIONS}`
  (no `allowed_domains`, so the session has no network). `corral gateway` runs as a
  subprocess; `corral mcp --agent {AGENT}` is reached over stdio by the MCP Python SDK
  {local_version("mcp")} client (`Client(..., mode="legacy")`), which calls `computer_*`.
  Each call goes client -> `corral mcp` -> signed loopback HTTP -> gateway -> the kiosk
  container's attached stdin/stdout -> kiosk agent, and back. A screenshot includes the
  kiosk agent's two masking probes (before and after the grab) and the gateway's masking pass.
- **kiosk channel** (no MCP, no gateway): the same kind of kiosk container (same image, same
  hardening: `sandboxes.isolation.kiosk_spec` + the rig's seccomp profile) driven
  from this process through `orchestrator.kiosk.KioskChannel`, ops `screenshot` and `click`:
  the difference to the row above is what MCP and the gateway add.
- **docker exec python3**, **docker exec xdotool** (the reference): what other
  implementations do, a fresh process per action, started through the docker CLI in the
  kiosk channel's container. Screenshot: `python3 -c SHOT_PY`, an Xlib `get_image` of the
  root window and a Pillow PNG with the kiosk agent's encoder settings (`compress_level=1`)
  on stdout, checked to be a {WIDTH}x{HEIGHT} PNG; click: xdotool with its defaults:

  ```sh
  {shot}
  {click}
  ```

  ```python
{indented_shot_py}
  ```

- **start + 1st screenshot**: `computer_session_start` then `computer_screenshot`
  through MCP, against the kiosk channel doing the same (create, attach and start the
  container, op `start`, op `screenshot`), which is that operation's reference row; the
  session is stopped after each, not timed. {START_WARMUP} warm-up start (not counted), then
  {starts} timed, alternating paths.

Screenshot and click: {WARMUP} warm-up rounds (not counted), then {runs} timed rounds, each
round running every path once per operation in rotating order, so drift in the machine's
speed hits all paths alike. p50 and p95 are nearest-rank percentiles; "vs ref" is each
row's p50 divided by the p50 of its operation's (ref) row.

Targets (from the issue), through MCP on this machine: click round trip under
{CLICK_TARGET_MS:g} ms p50, screenshot under {SCREENSHOT_TARGET_MS:g} ms p50 at {WIDTH}x{HEIGHT}.
{targets_paragraph(results)}

Command (from the repository root):

```sh
{command}
```

Machine: {machine.nproc} CPUs (`nproc`), Docker server {machine.docker_version},
{machine.kernel}; {machine.others_running} other container(s) were running on the engine
when the run began (the machine is shared: other test runs may have overlapped). Run on
{machine.date}.

{markdown_table(results)}

{extra}
{SECTION_END}"""


def local_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


# --- main -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--runs",
        type=int,
        default=DEFAULT_RUNS,
        help=f"timed screenshot/click rounds ({DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--starts",
        type=int,
        default=DEFAULT_STARTS,
        help=f"timed session starts per path ({DEFAULT_STARTS})",
    )
    parser.add_argument(
        "--write", metavar="PATH", help="write/replace the results section in this markdown file"
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.starts < 1:
        parser.error("--runs and --starts must be at least 1")
    return args


def canonical_command(runs: int, starts: int, write: str | None) -> str:
    argv = [".venv/bin/python", "bench/computer_use.py", "--runs", str(runs)]
    if starts != DEFAULT_STARTS:
        argv += ["--starts", str(starts)]
    if write is not None:
        argv += ["--write", write]
    return shlex.join(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs: int = args.runs
    starts: int = args.starts
    machine = describe_machine()
    obs = Observations()
    me = os.getpid()
    owners: list[tuple[int, int | None]] = [(me, owner_start_time(me))]
    with tempfile.TemporaryDirectory(prefix="corral-bench-cu-") as tmp:
        home = CorralHome(Path(tmp).resolve() / "home")
        port = free_port()
        prepare_home(home, port)
        try:
            with running_gateway(home, port, Path(tmp) / "gateway.log") as gateway:
                owners.append((gateway.proc.pid, gateway.start_time))
                console.print(f"[dim]corral gateway (pid {gateway.proc.pid}) at {gateway.url}[/]")
                results = anyio.run(measure, home, runs, starts, obs)
        except BaseException:
            with contextlib.suppress(BenchError):  # the first failure is the one to report
                check_leftovers(owners)
            raise
        # The leak check comes before --write: figures from a run that leaks are not published.
        check_leftovers(owners)
    console.print("no container of this benchmark or its gateway left behind")
    print_report(machine, results, obs)
    if args.write is not None:
        section = markdown_section(
            machine, results, obs, runs, canonical_command(runs, starts, args.write)
        )
        write_section(Path(args.write), SECTION, section)
        console.print(f"wrote the section to {args.write}")
    return 0


if __name__ == "__main__":
    run_main(main, console)
