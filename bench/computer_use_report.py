"""The computer_use benchmark's report: the machine it ran on, the check for containers left
behind, the console table and the docs/benchmarks.md section (run bench/computer_use.py)."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata

from _common import BenchError, docker_cli, nearest_rank
from computer_use_paths import (
    AGENT,
    CHANNEL,
    CLICK,
    CLICK_TARGET_MS,
    HEIGHT,
    MAX_ACTIONS,
    MCP,
    SCREENSHOT_TARGET_MS,
    SECTION_END,
    SECTION_START,
    SHOT,
    SHOT_PY,
    START_WARMUP,
    WARMUP,
    WIDTH,
    Observations,
    Result,
    console,
    exec_click_argv,
    exec_screenshot_argv,
    key,
)
from rich.table import Table

from orchestrator.owner import LABEL_MANAGED, LABEL_OWNER_PID, LABEL_OWNER_START

# --- the machine ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Machine:
    nproc: int
    docker_version: str
    kernel: str
    date: str
    others_running: int


def machine_paragraph(machine: Machine) -> str:
    """The sentence every benchmark section here ends its set-up with."""
    return (
        f"Machine: {machine.nproc} CPUs (`nproc`), Docker server {machine.docker_version},\n"
        f"{machine.kernel}; {machine.others_running} other container(s) were running on "
        "the engine\nwhen the run began (the machine is shared: other test runs may have "
        f"overlapped). Run on\n{machine.date}."
    )


def describe_machine() -> Machine:
    running = docker_cli("ps", "-q").split()
    return Machine(
        nproc=len(os.sched_getaffinity(0)),
        docker_version=docker_cli("version", "--format", "{{.Server.Version}}").strip(),
        kernel=f"{platform.system()} {platform.release()} {platform.machine()}",
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        others_running=len(running),
    )


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

{machine_paragraph(machine)}

{markdown_table(results)}

{extra}
{SECTION_END}"""


def local_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"
