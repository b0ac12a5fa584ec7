"""What every bench script shares: percentiles, the error type, the entry point, a
Ctrl-C-proof cleanup block, and writing one benchmark's section into docs/benchmarks.md."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from sandboxes.ports import ContainerBackend


class BenchError(RuntimeError):
    """The benchmark cannot produce trustworthy figures (wrong output, leftovers, ...)."""


def docker_cli(*args: str) -> str:
    """Run a short docker CLI command; return its stdout, fail loudly otherwise."""
    if shutil.which("docker") is None:
        raise BenchError("the docker CLI is not on PATH")
    done = subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"`docker {shlex.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


def nearest_rank(samples: Sequence[float], percent: float) -> float:
    """The nearest-rank percentile: the ceil(percent/100 * n)-th smallest sample."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


class Timings:
    """p50 / p95 / min of `samples_ms`, for result dataclasses."""

    samples_ms: tuple[float, ...]

    @property
    def p50(self) -> float:
        return nearest_rank(self.samples_ms, 50)

    @property
    def p95(self) -> float:
        return nearest_rank(self.samples_ms, 95)

    @property
    def minimum(self) -> float:
        return min(self.samples_ms)


@dataclass(frozen=True)
class NamedTimings(Timings):
    """One row of a latency table: an operation and its samples."""

    name: str
    samples_ms: tuple[float, ...]


def latency_table(rows: Sequence[NamedTimings]) -> list[str]:
    """The markdown table every latency section uses: operation, n, p50, p95, min."""
    lines = ["| operation | n | p50 ms | p95 ms | min ms |", "|---|---|---|---|---|"]
    lines += [
        f"| {r.name} | {len(r.samples_ms)} | {r.p50:.0f} | {r.p95:.0f} | {r.minimum:.0f} |"
        for r in rows
    ]
    return lines


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """Cleanup that a second Ctrl-C must not cut short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_main(main: Callable[[], int], console: Console) -> None:
    """The `if __name__ == "__main__"` body: exit with main's code; a BenchError (also one
    wrapped in exception groups) is reported."""
    try:
        sys.exit(main())
    except BenchError as exc:
        console.print(f"[bold red]benchmark failed:[/bold red] {exc}")
        sys.exit(1)
    except BaseExceptionGroup as group:
        # Task groups (the MCP client's, anyio's) wrap what fails inside them.
        failed, other = group.split(BenchError)
        if failed is None or other is not None:
            raise
        console.print(f"[bold red]benchmark failed:[/bold red] {'; '.join(leaves(failed))}")
        sys.exit(1)


def leaves(group: BaseExceptionGroup[BaseException]) -> list[str]:
    """The messages of the exceptions at the bottom of a (nested) exception group."""
    found: list[str] = []
    for exc in group.exceptions:
        found += leaves(exc) if isinstance(exc, BaseExceptionGroup) else [str(exc)]
    return found


INTRO = (
    "# Benchmarks\n\n"
    "Figures here are from one run on a {nproc}-core machine; absolute times vary between "
    "machines and runs, so compare ratios within a run.\n"
)


class SectionError(Exception):
    """The markers of a section are unbalanced in the target file."""


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"


def write_section(path: Path, name: str, section: str) -> None:
    """Replace section `name` of `path` (delimited by its markers) or append it; keep the rest.

    `section` must itself start and end with the markers from `markers(name)`.
    """
    start_marker, end_marker = markers(name)
    text = (
        path.read_text(encoding="utf-8")
        if path.exists()
        else INTRO.format(nproc=os.cpu_count() or "?")
    )
    starts, ends = text.count(start_marker), text.count(end_marker)
    start, end = text.find(start_marker), text.find(end_marker)
    if starts == 0 and ends == 0:
        new = text.rstrip("\n") + "\n\n" + section + "\n"
    elif starts == 1 and ends == 1 and end > start:
        new = text[:start] + section + text[end + len(end_marker) :]
    else:
        raise SectionError(f"{path}: the markers of section {name!r} are unbalanced; fix by hand")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, path)


def runs_and_write(
    argv: Sequence[str] | None,
    doc: str | None,
    default_runs: int,
    runs_help: str,
    more: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The `--runs N` and `--write PATH` options most benchmarks take (and `more`'s)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--runs", type=int, default=default_runs, help=runs_help)
    if more is not None:
        more(parser)
    parser.add_argument(
        "--write", metavar="PATH", help="write/replace the results section in this markdown file"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def publish(console: Console, section: str, path: str | None, name: str) -> None:
    """Print a benchmark's markdown section, and write it into `path` (section `name`)."""
    console.print(section, markup=False)
    if path:
        write_section(Path(path), name, section)


@dataclass(frozen=True, slots=True)
class Child:
    pid: int
    start_time: int  # clock ticks after boot (/proc/PID/stat field 22)
    argv: list[bytes]


def running_children(parent: int) -> list[Child]:
    """The running (not zombie) children of `parent`, read from /proc: the one scan the
    benchmarks use to find the `corral mcp` servers they started."""
    return children_of({parent})[parent]


def children_of(parents: set[int]) -> dict[int, list[Child]]:
    """The running children of each of `parents`, in one scan of /proc (a command line is
    read only for a child of one of them)."""
    found: dict[int, list[Child]] = {parent: [] for parent in parents}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text(encoding="utf-8")
            fields = raw[raw.rindex(")") + 2 :].split()
            parent = int(fields[1])
            if parent not in found or fields[0] in ("Z", "X"):
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        found[parent].append(Child(int(entry.name), int(fields[19]), argv))
    return found


def local_backend() -> ContainerBackend:
    """The engine a default config chooses (local Docker, or DOCKER_HOST), through the one
    chooser the gateway uses: a benchmark drives corral's `ContainerBackend` port, never a
    backend class of its own choosing."""
    from orchestrator.backends.choose import backend_for
    from orchestrator.backends.owner import Owner
    from orchestrator.config import CorralConfig

    return backend_for(CorralConfig(), Owner.current(), os.environ)
