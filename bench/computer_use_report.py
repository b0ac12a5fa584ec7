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
    FREE_AGENT,
    HEAVY,
    HEAVY_TARGET_MS,
    HEIGHT,
    MAX_ACTIONS,
    MCP,
    PROBE,
    SCREENSHOT_TARGET_MS,
    SECTION_END,
    SECTION_START,
    SHOT,
    SHOT_PY,
    START_WARMUP,
    WARMUP,
    WEB_AGENT,
    WIDTH,
    Observations,
    Result,
    console,
    exec_click_argv,
    exec_screenshot_argv,
    key,
)
from computer_use_site import (
    DOCUMENT_INPUTS,
    FRAMES,
    HEAVY_URL,
    INPUTS_PER_FRAME,
    SECRET_FIELDS,
    SHADOW_INPUTS,
    SITE,
    TOTAL_INPUTS,
)
from rich.markup import escape
from rich.table import Table

from orchestrator.backends.owner import LABEL_MANAGED, LABEL_OWNER_PID, LABEL_OWNER_START

# --- the machine ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Machine:
    nproc: int
    docker_version: str
    kernel: str
    date: str
    others_running: int


def machine_line(machine: Machine) -> str:
    """The one line every console report here prints about the machine."""
    return (
        f"machine: nproc={machine.nproc}, Docker server {machine.docker_version}, "
        f"{machine.kernel}; {machine.others_running} container(s) running on the engine at "
        f"the start; date: {machine.date}"
    )


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


def reference_of(result: Result, results: Sequence[Result]) -> Result | None:
    """The (ref) row of `result`'s operation; None for the probe, which has none."""
    for other in results:
        if other.row.operation == result.row.operation and other.row.reference:
            return other
    if result.row.operation == PROBE:
        return None
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
                "" if ref is None else f"{r.p50 / ref.p50:.2f}x",
                target_cell(r),
            ]
        )
    return rows


def median(values: Sequence[float]) -> float:
    return nearest_rank(values, 50) if values else float("nan")


def verdict(met: bool) -> str:
    return "PASS" if met else "FAIL"


def counts(values: Sequence[int]) -> str:
    """`5 x30` for thirty 5s; `5 x29, 0 x1` when they differ."""
    found = {v: values.count(v) for v in sorted(set(values), reverse=True)}
    return ", ".join(f"{v} x{n}" for v, n in found.items()) or "none"


def probe_share(results: Sequence[Result]) -> str:
    """The issue's line: the probe's p50 against the heavy-page screenshot's, through MCP."""
    by_key = {key(r.row): r for r in results}
    probe, shot = by_key[(PROBE, CHANNEL)], by_key[(HEAVY, MCP)]
    return (
        f"Heavy page: probe p50 {probe.p50:.1f} ms of the screenshot's {shot.p50:.1f} ms "
        f"(the screenshot op probes twice, before and after the grab: 2 x {probe.p50:.1f} = "
        f"{2 * probe.p50 / shot.p50:.0%} of it); screenshot of a heavy page through MCP "
        f"under {HEAVY_TARGET_MS:g} ms p50: {verdict(shot.p50 < HEAVY_TARGET_MS)}."
    )


def probe_steps(heavy: Observations) -> str:
    """The median of each step the probe timed itself (its `ms`), inside the kiosk agent."""
    names = [name for steps in heavy.probe_steps[:1] for name in steps]
    if not names:
        return "the probe reported no timings of its own"
    parts = [f"{n} {median([s.get(n, 0.0) for s in heavy.probe_steps]):.1f}" for n in names]
    total = median([sum(s.values()) for s in heavy.probe_steps])
    return (
        f"inside the kiosk agent (its own `ms`, medians): {', '.join(parts)}; "
        f"{total:.1f} in all, the rest is the channel round trip (AT-SPI runs on its own "
        "thread while the DOM is read; `atspi` is the wait left after the DOM)"
    )


def heavy_notes(results: Sequence[Result], heavy: Observations) -> list[str]:
    by_key = {key(r.row): r for r in results}
    over = by_key[(HEAVY, MCP)].p50 - by_key[(HEAVY, CHANNEL)].p50
    full = sum(heavy.mcp_masked)
    errors = " | ".join(sorted(heavy.probe_errors))[:300]
    return [
        f"Heavy page, the probe {probe_steps(heavy)}.",
        f"Heavy page, MCP + gateway over the raw kiosk channel, p50: +{over:.1f} ms (the "
        "kiosk paints the secret fields black before encoding; the gateway checks they are "
        "its plan's and passes the PNG through).",
        f"Heavy page, distinct secret fields per probe: {counts(heavy.probe_fields)} "
        f"(rectangles: {counts(heavy.probe_rects)}; the DOM probe and its AT-SPI cross-check "
        "both report the password fields, a pixel apart); rectangles masked per MCP "
        f"screenshot: {counts(heavy.masked_fields)}"
        + (f"; {full} came back fully masked" if full else "")
        + (f"; probe errors: {errors}" if errors else "")
        + ".",
        f"Heavy-page PNG sizes (median bytes): MCP {median(heavy.mcp_png_bytes):.0f} (masked), "
        f"kiosk channel {median(heavy.channel_png_bytes):.0f}, docker exec "
        f"{median(heavy.exec_png_bytes):.0f}.",
    ]


def notes(results: Sequence[Result], obs: Observations, heavy: Observations) -> list[str]:
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
    return lines + heavy_notes(results, heavy)


def print_report(
    machine: Machine, results: Sequence[Result], obs: Observations, heavy: Observations
) -> None:
    table = Table(
        title=f"computer_use round trips ({WIDTH}x{HEIGHT}; about:blank without network, "
        "then the heavy page)"
    )
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
    console.print(machine_line(machine))
    console.print(table)
    console.print(
        "[dim]p50/p95: nearest-rank percentiles; 'vs ref' is the ratio of p50s to the "
        "operation's (ref) row.[/dim]"
    )
    console.print(probe_share(results))
    for line in notes(results, obs, heavy):
        console.print(f"[dim]{escape(line)}[/dim]")


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


def heavy_paragraph() -> str:
    """How the heavy-page rows are measured (markdown)."""
    return f"""The heavy page (`bench/computer_use_site.py`): {TOTAL_INPUTS} inputs,
{SECRET_FIELDS} of them secret (3 `type=password`, `autocomplete=cc-number`,
`autocomplete=one-time-code`): {DOCUMENT_INPUTS} in the document, {INPUTS_PER_FRAME} in each
of {FRAMES} same-origin iframes and {SHADOW_INPUTS} in one open shadow root, all inside the
{WIDTH}x{HEIGHT} viewport, so every screenshot has {SECRET_FIELDS} secret fields to mask.

- **screenshot of a heavy page, corral MCP**: a second agent `{WEB_AGENT}` (the same
  template, `allowed_domains = ["{SITE}"]`) in the same `CORRAL_HOME`, whose
  `config.toml` also sets `[container.kiosk] extra_ca_file` (a throwaway test CA) and
  `resolve_overrides = {{ "{SITE}" = <site IP> }}`. The page is served over
  HTTPS by a site container on the `corral-egress` network (`tests/sites.py`: `make_certs`,
  `start_site`; the iframes are routes of the same site); the session opens
  `{HEAVY_URL}` with `computer_navigate` through its egress proxy, checks
  that at least {SECRET_FIELDS} field rectangles come back masked (not the whole image), then
  times `computer_screenshot`.
- **kiosk channel**, **docker exec python3 (ref)**: the same page as a `data:` URL (its
  iframes `srcdoc`, so same-origin) in the kiosk channel's container, which has no network.
- **probe of the heavy page**: the kiosk agent's op `probe` alone through the kiosk channel
  on that page: what its screenshot op runs once before and once after the grab (the
  gateway then masks whatever either saw). No other implementation has one: no (ref) row.

Heavy page: {WARMUP} warm-up rounds, then the same number of timed rounds as above, each
running the four rows once in rotating order, after the session without network is
stopped."""


def markdown_section(
    machine: Machine,
    results: Sequence[Result],
    obs: Observations,
    heavy: Observations,
    runs: int,
    command: str,
) -> str:
    starts = len(results[0].samples_ms)
    shot = shlex.join(exec_screenshot_argv("ID")[:-1]) + ' "$SHOT_PY"'
    click = shlex.join(exec_click_argv("ID"))
    indented_shot_py = "\n".join(f"  {line}" for line in ["# SHOT_PY", *SHOT_PY.splitlines()])
    extra = "\n".join(f"- {line}" for line in notes(results, obs, heavy))
    return f"""{SECTION_START}
## computer_use: screenshot and click round trips

How long an agent waits for a kiosk action, corral's way against the way other computer-use
implementations drive a desktop container. Every figure is wall time as the caller sees it
(`time.perf_counter` around the call), at {WIDTH}x{HEIGHT}: the page is `about:blank` in a
session without network, except in the heavy-page rows (below).

- **corral MCP**: the real path. A throwaway `CORRAL_HOME` whose `config.toml` sets
  `[gateway] port` to a free port; agent `{AGENT}` is the rendered template with
  `computer_use = true` and `[capabilities.computer_use_config] max_actions = {MAX_ACTIONS}`
  (no `allowed_domains`, so the session has no network). `corral gateway` runs as a
  subprocess; `corral mcp --agent {AGENT}` is reached over stdio by the MCP Python SDK
  {local_version("mcp")} client (`Client(..., mode="legacy")`), which calls `computer_*`.
  Each call goes client -> `corral mcp` -> signed loopback HTTP -> gateway -> the kiosk
  container's attached stdin/stdout -> kiosk agent, and back. A screenshot includes the
  kiosk agent's two masking probes (before and after the grab) and the gateway's masking pass.
  Agent `{AGENT}` keeps the template's default confirm words, so each click first reads
  what it acts on (the kiosk's `target` op) for the approval rules.
- **click, corral MCP, no confirm rules**: the same path for a third agent `{FREE_AGENT}`
  (the same template with `confirm_words = []` and `confirm_urls = []`), its own session
  open beside `{AGENT}`'s and timed in the same rotating rounds: every stage of the one
  action pipeline but the rules' target read. The row without the rules' cost, so the
  shape's own cost can be compared with the tables from before the rules ran on clicks.
- **kiosk channel** (no MCP, no gateway): the same kind of kiosk container (same image, same
  hardening: `sandboxes.isolation.kiosk_spec` + the rig's seccomp profile) driven
  from this process through `orchestrator.backends.channel.KioskChannel`, ops `screenshot`
  and `click`: the difference to the row above is what MCP and the gateway add.
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

{heavy_paragraph()}

Targets (from the issues), through MCP on this machine: click round trip under
{CLICK_TARGET_MS:g} ms p50, screenshot under {SCREENSHOT_TARGET_MS:g} ms p50 at {WIDTH}x{HEIGHT},
screenshot of the heavy page under {HEAVY_TARGET_MS:g} ms p50, with the probe's share.
{targets_paragraph(results)}
{probe_share(results)}

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
