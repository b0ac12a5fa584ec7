"""A kiosk click's milliseconds, process by process: where the time between an agent's
JSON-RPC line and its answer goes inside the MCP front and the gateway.

`bench/layers.py` times each layer from outside; this one marks moments inside: it makes
a temporary git worktree of HEAD, adds a one-line mark at each point below (a write of
the process's CLOCK_MONOTONIC time to a file of its own; both processes and this one
read the same clock), runs `corral gateway` and `corral mcp` from that worktree and sends
clicks over raw stdio (agent `bench-free`: no confirm rules), then pairs each click with
the marks made inside it. The product's code is never changed: the worktree is removed.

Command (from the repository root):

    .venv/bin/python bench/spans.py --runs 400 --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _common import BenchError, publish, run_main, runs_and_write
from computer_use import free_port, running_gateway
from computer_use_paths import FREE_AGENT
from computer_use_report import describe_machine, machine_paragraph
from layers import prepare_home, raw_stdio
from rich.console import Console

from orchestrator.home import CorralHome, Environment

REPO = Path(__file__).resolve().parents[1]
SECTION = "spans"
WARMUP = 30
WHOLE = "whole"
console = Console(width=None if sys.stdout.isatty() else 120)
MARK = "from orchestrator._spans import mark; mark({!r})"

# (file, the anchor (its first line gives the indentation), where: "before" or "after" it,
# the mark's name). Each anchor must be found exactly where it is meant (the first match).
POINTS = (
    ("mcp_front/stdio.py", "        line = bytes(self._buffer[: end + 1])", "before", "line in"),
    (
        "mcp_front/server.py",
        "        self._remember(ctx)\n        started = time.monotonic()",
        "before",
        "tool call",
    ),
    (
        "mcp_front/forwarder.py",
        '    url = gateway_url.rstrip("/") + COMPUTER_USE_PATH',
        "after",
        "signed",
    ),
    (
        "orchestrator/gateway/app.py",
        '        if scope["type"] not in ("http", "websocket")',
        "before",
        "gateway in",
    ),
    (
        "orchestrator/gateway/app.py",
        "        call = await signed.model(request, ComputerUseRequest)",
        "after",
        "checked",
    ),
    (
        "orchestrator/backends/channel.py",
        "                    await self._container.send(line)",
        "before",
        "to kiosk",
    ),
    (
        "orchestrator/backends/channel.py",
        "                    answer = await self._answer_to(ident)",
        "after",
        "kiosk answered",
    ),
    (
        "orchestrator/gateway/call_stream.py",
        "                done = await self._run(StreamedEvents(answer))",
        "after",
        "answer made",
    ),
    (
        "orchestrator/gateway/call_stream.py",
        "                await self._send("
        '{"type": "http.response.body", "body": data, "more_body": False})',
        "after",
        "body sent",
    ),
    (
        "mcp_front/forwarder.py",
        "    blocks: list[types.ContentBlock] = []",
        "before",
        "result read",
    ),
    (
        "mcp_front/server.py",
        '        log("error" if result.is_error else "allowed")',
        "before",
        "tool done",
    ),
)
SPANS_MODULE = """import os, time
_fd = None
def mark(name):
    global _fd
    if _fd is None:
        path = f"{os.environ['CORRAL_SPANS_DIR']}/spans-{os.getpid()}.txt"
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(_fd, f"{time.monotonic_ns()} {name}\\n".encode())
"""
ORDER = ("sent", *(point[3] for point in POINTS), "answer back")


def marked(tree: Path) -> None:
    """Add every mark to the worktree at `tree` (and the module they call)."""
    (tree / "orchestrator" / "_spans.py").write_text(SPANS_MODULE, encoding="utf-8")
    for rel, anchor, where, name in POINTS:
        path = tree / rel
        text = path.read_text(encoding="utf-8")
        at = text.find(anchor)
        if at < 0:
            raise BenchError(f"{rel}: the anchor of {name!r} is gone; update bench/spans.py")
        indent = anchor[: len(anchor) - len(anchor.lstrip())]
        line = f"{indent}{MARK.format(name)}\n"
        if where == "before":
            text = text[:at] + line + text[at:]
        else:
            end = text.index("\n", at + len(anchor.splitlines()[0])) + 1
            text = text[:end] + line + text[end:]
        path.write_text(text, encoding="utf-8")


async def clicks(home: CorralHome, runs: int, pause_ms: float) -> list[tuple[int, int]]:
    """(sent, answered) monotonic ns of each timed click over raw stdio, `pause_ms` of
    nothing before each (an agent that thinks between its calls finds the processes idle)."""
    timed: list[tuple[int, int]] = []
    async with raw_stdio(home, FREE_AGENT) as raw:
        started = await raw.request(
            "tools/call", {"name": "computer_session_start", "arguments": {}}
        )
        if started.get("isError"):
            raise BenchError(f"computer_session_start: {started}"[:300])
        for run in range(WARMUP + runs):
            if pause_ms:
                await anyio.sleep(pause_ms / 1000)
            sent = time.monotonic_ns()
            await raw.click()
            if run >= WARMUP:
                timed.append((sent, time.monotonic_ns()))
        await raw.request("tools/call", {"name": "computer_session_stop", "arguments": {}})
    return timed


def read_marks(folder: Path) -> list[tuple[int, str]]:
    marks = []
    for path in folder.glob("spans-*.txt"):
        for line in path.read_text(encoding="utf-8").splitlines():
            at, _, name = line.partition(" ")
            marks.append((int(at), name))
    return sorted(marks)


def steps(timed: list[tuple[int, int]], marks: list[tuple[int, str]]) -> dict[str, list[float]]:
    """Per step between consecutive moments of ORDER, the ms of every click that has both
    (a click's first mark of each name)."""
    per: dict[str, list[float]] = {}
    for sent, back in timed:
        moments = {"sent": sent, "answer back": back}
        for at, name in marks:
            if sent <= at <= back:
                moments.setdefault(name, at)
        per.setdefault(WHOLE, []).append((back - sent) / 1e6)
        names = [name for name in ORDER if name in moments]
        for before, after in itertools.pairwise(names):
            ms = (moments[after] - moments[before]) / 1e6
            per.setdefault(f"{before} -> {after}", []).append(ms)
    return per


def measure(runs: int, pause_ms: float) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="corral-bench-spans-") as tmp:
        tree, out = Path(tmp) / "tree", Path(tmp) / "marks"
        out.mkdir()
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree)], check=True
        )
        try:
            marked(tree)
            os.environ["PYTHONPATH"] = str(tree)  # the gateway and `corral mcp` run the tree
            os.environ["CORRAL_SPANS_DIR"] = str(out)
            home = CorralHome(
                Path(tmp).resolve() / "home", env=Environment.from_environ(os.environ)
            )
            port = free_port()
            prepare_home(home, port)
            with running_gateway(home, port, Path(tmp) / "gateway.log"):
                timed = anyio.run(clicks, home, runs, pause_ms)
            marks = read_marks(out)
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False
            )
    if not marks:
        raise BenchError("no mark was made: the processes did not run the marked tree")
    return steps(timed, marks)


def report(per: dict[str, list[float]], runs: int, machine: str) -> str:
    start, end = f"<!-- bench:{SECTION}:start -->", f"<!-- bench:{SECTION}:end -->"
    whole = per.pop(WHOLE)
    kept = {step: ms for step, ms in per.items() if len(ms) >= len(whole) // 2}  # not a rare
    rows = [f"| {step} | {len(ms)} | {statistics.median(ms):.2f} |" for step, ms in kept.items()]
    rows.append(
        f"| the whole click, sent -> answer back | {len(whole)} | {statistics.median(whole):.2f} |"
    )
    total = sum(statistics.median(ms) for step, ms in kept.items() if ms is not whole)
    return f"""{start}
## A kiosk click, process by process (issue 23 item 9)

{__doc__.split(chr(10) + chr(10))[1]}

Command (from the repository root):

```sh
.venv/bin/python bench/spans.py --runs {runs} --write docs/benchmarks.md
```

{machine}

| step (client -> front -> gateway -> kiosk and back) | n | p50 ms |
|---|---|---|
{chr(10).join(rows)}

The steps' p50s add up to {total:.2f} ms (a sum of medians; a step whose two marks came in
the other order in most clicks, the processes racing, is left out). "line
in" to "tool call" and "tool done" to "answer back" are the MCP SDK's server (and the
pipes); "tool call" to "signed" the front's gate (the agent's view, the tool log) and the
signature; "signed" to "gateway in" and "body sent" to "result read" the loopback hop
(HTTP/1.1 both ways); "gateway in" to "checked" the gateway's checks (the body, the key,
the signature, the model); "checked" to "to kiosk" the action pipeline up to the input;
"to kiosk" to "kiosk answered" the kiosk channel (the engine's attach stream both ways and
the kiosk agent's xdotool); "kiosk answered" to "answer made" the audit, the timeline and
the recording's mark.
{end}"""


def pause_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=0.0,
        help="ms of nothing before each click (0: back to back)",
    )


def main(argv: list[str] | None = None) -> int:
    args = runs_and_write(argv, __doc__, 400, "timed clicks (400)", pause_option)
    per = measure(args.runs, args.pause_ms)
    publish(
        console, report(per, args.runs, machine_paragraph(describe_machine())), args.write, SECTION
    )
    return 0


if __name__ == "__main__":
    run_main(main, console)
