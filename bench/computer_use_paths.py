"""The computer_use benchmark's settings, the rows of its table, what a run records, and the
three paths it times: corral MCP, the raw kiosk channel, and docker exec (the reference).
The heavy page and its site are in bench/computer_use_site.py.

bench/computer_use.py (the command) drives the paths; bench/computer_use_report.py reports.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from _common import BenchError, Timings, markers
from mcp import Client
from rich.console import Console

from orchestrator.backends.channel import KioskChannel, load_seccomp
from orchestrator.config import KioskConfig
from sandboxes.isolation import kiosk_spec
from sandboxes.masking import png_size as header_size
from sandboxes.ports import ContainerBackend, ContainerSpec

SECTION = "computer_use"
SECTION_START, SECTION_END = markers(SECTION)

AGENT = "bench"  # no allowed_domains: its sessions have no network
WEB_AGENT = "bench-web"  # may open the heavy page's site (bench/computer_use_site.py)
FREE_AGENT = "bench-free"  # as AGENT, with no confirm words or URLs: its clicks read no target
WIDTH, HEIGHT = 1280, 800
CLICK_X, CLICK_Y = 640, 400
DISPLAY = ":99"  # the kiosk agent's Xvfb display
WARMUP = 2
START_WARMUP = 1
MAX_ACTIONS = 10_000  # the session budget: clicks must not be refused mid-run
CLICK_TARGET_MS = 30.0
SCREENSHOT_TARGET_MS = 100.0
HEAVY_TARGET_MS = 100.0  # a screenshot of the heavy page, through MCP

CALL_TIMEOUT_S = 120.0
KIOSK_START_DEADLINE_S = 60.0
KIOSK_ACTION_DEADLINE_S = 10.0

# The reference screenshot: one fresh process per screenshot, the same grab and the same
# PNG encoder settings as the kiosk agent (rig_images/kiosk/kiosk_agent/screen.py `encode_png`),
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
HEAVY = "screenshot of a heavy page"
PROBE = "probe of the heavy page"

MCP = "corral MCP"
MCP_FREE = "corral MCP, no confirm rules"  # the pipeline without the target read of the rules
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
    Row(CLICK, MCP_FREE),
    Row(CLICK, CHANNEL),
    Row(CLICK, EXEC_CLICK, reference=True),
    Row(HEAVY, MCP, target_ms=HEAVY_TARGET_MS),
    Row(HEAVY, CHANNEL),
    Row(HEAVY, EXEC_SHOT, reference=True),
    Row(PROBE, CHANNEL),  # op probe alone; no reference: no other implementation has one
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
    """What the calls returned, besides their times (reported under the table); one per
    page (about:blank, the heavy page)."""

    mcp_png_bytes: list[int] = field(default_factory=list)
    channel_png_bytes: list[int] = field(default_factory=list)
    exec_png_bytes: list[int] = field(default_factory=list)
    mcp_masked: list[bool] = field(default_factory=list)
    mask_notes: set[str] = field(default_factory=set)
    masked_fields: list[int] = field(default_factory=list)  # rectangles per MCP screenshot
    probe_rects: list[int] = field(default_factory=list)  # rectangles per channel probe
    probe_fields: list[int] = field(default_factory=list)  # distinct fields among them
    probe_steps: list[dict[str, float]] = field(default_factory=list)  # the probe's own `ms`
    probe_errors: set[str] = field(default_factory=set)
    kiosk_start_ms: list[float] = field(default_factory=list)


# --- small helpers --------------------------------------------------------------------


def png_size(data: bytes, what: str) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk; BenchError if `data` is not a PNG."""
    size = header_size(data)
    if size is None:
        raise BenchError(f"{what}: not a PNG ({len(data)} bytes, starts {data[:16]!r})")
    return size


def check_png(data: bytes, what: str) -> int:
    size = png_size(data, what)
    if size != (WIDTH, HEIGHT):
        raise BenchError(f"{what}: a {size[0]}x{size[1]} PNG, expected {WIDTH}x{HEIGHT}")
    return len(data)


def distinct_fields(rects: Sequence[Sequence[int]], slack: int = 3) -> int:
    """How many fields `rects` cover: the DOM probe and its AT-SPI cross-check can both
    report one field, a pixel or two apart; rectangles whose corners are within `slack`
    pixels count once."""
    seen: list[tuple[int, int]] = []
    for rect in rects:
        x, y = int(rect[0]), int(rect[1])
        if not any(abs(x - sx) <= slack and abs(y - sy) <= slack for sx, sy in seen):
            seen.append((x, y))
    return len(seen)


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
    obs.masked_fields.append(int(structured.get("masked_fields") or 0))
    if masked:
        obs.mask_notes.add(result_text(result))
    return base64.b64decode(images[0].data)


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

    async def navigate(self, url: str) -> None:
        check_call("computer_navigate", await self.call("computer_navigate", {"url": url}))

    async def click(self, run: int) -> float:
        started = time.perf_counter()
        result = await self.call("computer_click", {"x": CLICK_X, "y": CLICK_Y})
        elapsed = time.perf_counter() - started
        check_call("computer_click", result)
        return elapsed


def reference_spec(backend: ContainerBackend) -> ContainerSpec:
    """The kiosk container as the gateway creates one for a session without network (default
    image, same hardening, this process as its owner)."""
    return kiosk_spec(
        image=KioskConfig().image,
        labels=backend.labels(kind="bench-kiosk", agent=AGENT, session="reference"),
        network=None,
        seccomp=load_seccomp(),
    )


@asynccontextmanager
async def started_kiosk(
    backend: ContainerBackend, obs: Observations
) -> AsyncIterator[KioskChannel]:
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
    backend: ContainerBackend
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

    async def navigate(self, url: str) -> None:
        result = await self._channel().request("navigate", KIOSK_START_DEADLINE_S, url=url)
        if result.get("error_text") or result.get("load_timeout"):
            raise BenchError(f"the kiosk channel did not load the page: {result!r}"[:400])

    async def probe(self, run: int) -> float:
        """Op probe alone: what the kiosk agent's screenshot op runs before and after the grab."""
        started = time.perf_counter()
        found = await self._channel().request("probe", KIOSK_ACTION_DEADLINE_S)
        elapsed = time.perf_counter() - started
        rects = found.get("password_rects") or []
        self.obs.probe_rects.append(len(rects))
        self.obs.probe_fields.append(distinct_fields(rects))
        steps = found.get("ms")
        if isinstance(steps, dict):
            self.obs.probe_steps.append({str(k): float(v) for k, v in steps.items()})
        if found.get("error"):
            self.obs.probe_errors.add(str(found["error"]))
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
