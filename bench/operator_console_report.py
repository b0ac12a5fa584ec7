"""The operator-console benchmark's settings, the rows of its table, what its rounds record
besides their times, the console table and the docs/benchmarks.md section (run
bench/operator_console.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from _common import markers
from computer_use_paths import WARMUP, WEB_AGENT, Result, Row, console, key
from computer_use_report import Machine, machine_line, machine_paragraph, median
from rich.markup import escape
from rich.table import Table

from orchestrator.gateway.wire import ADMIN_DECIDE_PATH

SECTION = "operator_console"
AGENT = WEB_AGENT  # computer_use on, SITE allowed, the default confirm_words
OPERATOR = "bench-op"
DEFAULT_RUNS = 20
FREEZE_TARGET_MS = 100.0


APPROVE = "approve -> call returns"
FREEZE = "input -> AI frozen"
BY_CONSOLE = "console: POST act/approve"
BY_ADMIN = "admin API: signed POST"
BY_CLI = "CLI: approvals approve"
AGENT_SIDE = "agent: a click refused"
AUDITED = "gateway: audit (upper bound)"
POLLED = "console: api/state human"
ROWS: tuple[Row, ...] = (
    Row(APPROVE, BY_CONSOLE),
    Row(APPROVE, BY_ADMIN),
    Row(APPROVE, BY_CLI),
    Row(FREEZE, AGENT_SIDE, target_ms=FREEZE_TARGET_MS),
    Row(FREEZE, AUDITED, target_ms=FREEZE_TARGET_MS),
    Row(FREEZE, POLLED, target_ms=FREEZE_TARGET_MS),
)


@dataclass
class Extras:
    """What the rounds saw besides their times (reported under the table)."""

    raised_ms: list[float] = field(default_factory=list)  # click sent -> approval listed
    clicks_through: list[int] = field(default_factory=list)  # agent clicks run before t1
    refused_ms: list[float] = field(default_factory=list)  # the refused click's own trip
    audited_ms: list[float] = field(default_factory=list)  # takeover audit time - t0
    polls: list[int] = field(default_factory=list)  # GETs until api/state said human


# --- the report -----------------------------------------------------------------------

HEADERS = ("operation", "path", "runs", "p50 ms", "p95 ms", "min ms", "target p50")
SECTION_START, SECTION_END = markers(SECTION)


def target_cell(result: Result) -> str:
    target = result.row.target_ms
    if target is None:
        return ""
    return f"{'PASS' if result.p50 <= target else 'FAIL'} (<={target:g})"


def table_rows(results: Sequence[Result]) -> list[list[str]]:
    return [
        [
            r.row.operation,
            r.row.path,
            str(len(r.samples_ms)),
            f"{r.p50:.1f}",
            f"{r.p95:.1f}",
            f"{r.minimum:.1f}",
            target_cell(r),
        ]
        for r in results
    ]


def notes(extras: Extras) -> list[str]:
    return [
        "Approve: t0 just before the decision is sent (the console's POST, the admin API's "
        "signed POST over an open connection, or starting the CLI process), t1 when the "
        "agent's `call_tool` returns; the held click runs in the kiosk before it answers.",
        f"Approve: the click's approval showed in /console/api/state a median "
        f"{median(extras.raised_ms):.0f} ms after the agent sent it (the kiosk reads the "
        "click target's name and takes the masked screenshot first; not in the figures).",
        "Console input: t0 just before the PointerEvent with button 1 down is sent on the "
        "live view's WebSocket; agent row: t1 when the agent's first refused click answers "
        "(it clicks back to back from t0); audit row, same rounds: the `takeover` audit "
        "event's time (wall clock, cut to the ms) + 1 ms - t0, so at most 1 ms over the "
        "truth; api/state row: t1 when a GET "
        "(back to back from t0) first says the operator has the desktop, rounds of its own.",
        f"Console input: agent clicks that still ran after t0, per round: median "
        f"{median(extras.clicks_through):.0f} (max {max(extras.clicks_through, default=0)}); "
        f"the refused click's own round trip, median {median(extras.refused_ms):.1f} ms; "
        f"GETs of api/state per round, median {median(extras.polls):.0f}.",
    ]


def print_report(machine: Machine, results: Sequence[Result], extras: Extras) -> None:
    table = Table(title="Operator console: approve and take over (p50 nearest-rank)")
    for i, header in enumerate(HEADERS):
        left = i < 2 or i == len(HEADERS) - 1
        table.add_column(header, justify="left" if left else "right", no_wrap=True)
    for result, cells in zip(results, table_rows(results), strict=True):
        if result.row.target_ms is not None:
            colour = "green" if result.p50 <= result.row.target_ms else "red"
            cells[-1] = f"[{colour}]{cells[-1]}[/{colour}]"
        table.add_row(*cells)
    console.print()
    console.print(machine_line(machine))
    console.print(table)
    for line in notes(extras):
        console.print(f"[dim]{escape(line)}[/dim]")


def markdown_section(
    machine: Machine, results: Sequence[Result], extras: Extras, runs: int, command: str
) -> str:
    header = "| " + " | ".join(HEADERS) + " |\n|---|---|" + "---:|" * 4 + "---|\n"
    table = header + "\n".join("| " + " | ".join(row) + " |" for row in table_rows(results))
    agent_side = next(r for r in results if key(r.row) == (FREEZE, AGENT_SIDE))
    verdict = "met" if agent_side.p50 <= FREEZE_TARGET_MS else "**missed**"
    extra = "\n".join(f"- {line}" for line in notes(extras))
    return f"""{SECTION_START}
## Operator console: approve and take over

How long an operator's action takes to reach the agent (issue 10): from the Approve click
to the agent's held call returning, and from the first input on the console's live view to
the AI being frozen (target: at most {FREEZE_TARGET_MS:g} ms p50).

A local HTTPS site container serves a checkout page ("Pay now" at (100..300, 100..180),
"Continue" at (400..600, 100..180)); agent `{AGENT}` (computer_use on, the site in
`allowed_domains`, the default `confirm_words`, which hold a click on "Pay now") drives a
kiosk session through `corral mcp` over stdio against a real `corral gateway`; operator
`{OPERATOR}` (`corral operators add`) is logged in to the console over HTTP, and its live
view is a WebSocket speaking RFB 3.8 as a client (security None, shared), as noVNC does.

- **Approve**: the agent clicks "Pay now"; the bench polls `GET /console/api/state` until
  the approval is pending, then decides it one of three ways, in rotating order each
  round: the console's Approve button (`POST /console/act/approve/ID`, `X-CSRF-Token`),
  the admin API, what the CLI sends (`POST {ADMIN_DECIDE_PATH}`,
  with the operator's token), from this process over its open connection;
  or `corral approvals approve ID`, a fresh CLI process (mostly its start-up).
- **Console input**: with the live view open and the AI holding the seat, one
  PointerEvent with button 1 down takes the desktop (the gateway freezes the AI before it
  forwards that event). Seen three ways: by the agent, which clicks "Continue" back to
  back from t0 until a click is refused ("A person has the desktop"); by the gateway's
  `takeover` audit event in the same rounds; by the console, whose `GET
  /console/api/state` is polled back to back from t0 until the operator has the desktop
  (rounds of its own). The button is released and the desktop handed back (`POST
  /console/act/handback/{AGENT}`) after each round.

{WARMUP} warm-up rounds (not counted), then {runs} timed rounds of each.
Approve to the agent's call returning, through the console, p50: {results[0].p50:.1f} ms.
First console input to the AI frozen, as the agent sees it, at most
{FREEZE_TARGET_MS:g} ms p50: {verdict} ({agent_side.p50:.1f} ms).

Command (from the repository root):

```sh
{command}
```

{machine_paragraph(machine)}

{table}

{extra}
{SECTION_END}"""
