"""Benchmark: many kiosk sessions with allowlists at once on one machine (issue 14).

Run from the repository root (as root: the session firewall rules need it):

    .venv/bin/python bench/scale.py [--sessions 10 20 40] [--rounds 3] [--write docs/benchmarks.md]

For each N: N agents (each allowed the one local HTTPS site of bench/computer_use_site.py)
start a session at the same moment through the gateway's own handler
(`orchestrator.surfaces.kiosk.sessions.SessionManager.handle`, in this process: the same
checks, kiosk
containers, session networks, firewall rules and egress proxies as `corral gateway`, minus
the loopback HTTP hop and MCP front, which bench/computer_use.py measures), with the pool
off. Measured:

- time to all ready: from the N concurrent `computer_session_start` calls to the last
  answer ("started" says how many succeeded; the rest are listed with why);
- memory per session, idle on about:blank right after all are ready: the cgroup memory of
  the kiosk container and of its egress proxy (`memory.usage_in_bytes` minus
  `total_inactive_file`, what `docker stats` shows), median and max over the N sessions;
- under that load, --rounds rounds in which every session, all at once, takes a screenshot
  and then clicks: p50/p95 of all those calls;
- and one `computer_navigate` per session to the site (must load: the egress works at N).

Every session is ended before the next N; no container of this process may be left.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from _common import BenchError, local_backend, nearest_rank, run_main, write_section
from computer_use import agent_toml
from computer_use_report import check_leftovers, describe_machine, machine_paragraph
from computer_use_site import HEAVY_URL, SITE, heavy_site
from rich.console import Console
from rich.table import Table

from orchestrator.audit import AuditLog
from orchestrator.backends.owner import read_start_time as owner_start_time
from orchestrator.config import load_config
from orchestrator.gateway.service import egress_factory
from orchestrator.home import CorralHome, Environment
from orchestrator.surfaces.answers import Answer
from orchestrator.surfaces.kiosk.sessions import SessionManager

DEFAULT_SESSIONS = (10, 20, 40, 60)
DEFAULT_ROUNDS = 3
SECTION = "scale"
CGROUP = Path("/sys/fs/cgroup/memory/docker")
MiB = 1024**2
console = Console()


@dataclass(frozen=True, slots=True)
class Step:
    sessions: int
    all_ready_s: float
    kiosk_mib: tuple[float, ...]
    proxy_mib: tuple[float, ...]
    shot_ms: tuple[float, ...]
    click_ms: tuple[float, ...]
    navigated: int
    failed: tuple[str, ...]  # why each start that failed failed


def cgroup_mib(container_id: str) -> float:
    """What `docker stats` shows: usage minus inactive file pages (cgroup v1)."""
    base = CGROUP / container_id
    usage = int((base / "memory.usage_in_bytes").read_text())
    stat = dict(line.split() for line in (base / "memory.stat").read_text().splitlines())
    return (usage - int(stat.get("total_inactive_file", 0))) / MiB


def proxy_of(egress: object) -> str:
    """The session's egress proxy container (orchestrator.backends.docker.egress.SessionEgress)."""
    proxy = getattr(egress, "proxy_container_id", None)
    if not isinstance(proxy, str):
        raise BenchError("a session with an allowlist has no egress proxy")
    return proxy


def prepare(home: CorralHome, ca_file: Path, site_ip: str, count: int) -> list[str]:
    home.ensure()
    home.config_file.write_text(
        f'[container.kiosk]\nextra_ca_file = "{ca_file}"\n'
        f'resolve_overrides = {{ "{SITE}" = "{site_ip}" }}\n',
        encoding="utf-8",
    )
    agents = [f"scale-{i:02d}" for i in range(count)]
    for name in agents:
        path = home.agent_file(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # No confirm rules: this measures how many sessions a host holds; with them every
        # click reads its target first, and a read a loaded host cannot make in time is
        # held for an operator (fail safe), whom no benchmark has.
        path.write_text(agent_toml(name, (SITE,), rules=False), encoding="utf-8")
    return agents


def check(answer: Answer, what: str) -> Answer:
    if answer.is_error:
        raise BenchError(f"{what} failed: {answer.text[:400]}")
    return answer


async def step(manager: SessionManager, agents: Sequence[str], rounds: int) -> Step:
    started = time.perf_counter()
    failed: list[str] = []
    async with anyio.create_task_group() as tg:
        for agent in agents:

            async def start(agent: str = agent) -> None:
                try:
                    check(await manager.handle(agent, "computer_session_start", {}), agent)
                except BenchError as exc:
                    failed.append(str(exc))

            tg.start_soon(start)
    all_ready = time.perf_counter() - started
    agents = [a for a in agents if a in manager.sessions]
    if not agents:
        raise BenchError(f"no session started: {failed[:3]}")
    sessions = [manager.sessions[a] for a in agents]
    kiosk = tuple(cgroup_mib(s.channel.id) for s in sessions)
    proxy = tuple(cgroup_mib(proxy_of(s.egress)) for s in sessions)
    shots: list[float] = []
    clicks: list[float] = []
    for _ in range(rounds):
        async with anyio.create_task_group() as tg:
            for agent in agents:

                async def act(agent: str = agent) -> None:
                    t0 = time.perf_counter()
                    check(await manager.handle(agent, "computer_screenshot", {}), "screenshot")
                    t1 = time.perf_counter()
                    click = {"x": 640, "y": 400}
                    check(await manager.handle(agent, "computer_click", click), "click")
                    t2 = time.perf_counter()
                    shots.append((t1 - t0) * 1000)
                    clicks.append((t2 - t1) * 1000)

                tg.start_soon(act)
    navigated = 0
    for agent in agents:
        answer = await manager.handle(agent, "computer_navigate", {"url": HEAVY_URL})
        navigated += not answer.is_error
    await manager.close_all("the benchmark step ended")
    return Step(
        len(agents) + len(failed),
        all_ready,
        kiosk,
        proxy,
        tuple(shots),
        tuple(clicks),
        navigated,
        tuple(failed),
    )


async def measure(home: CorralHome, counts: Sequence[int], rounds: int) -> list[Step]:
    config = load_config(home.config_file, home.env.image_tag)  # $CORRAL_IMAGE_TAG
    backend = local_backend()
    manager = SessionManager(
        home, config, backend, AuditLog(home.audit_file), egress_factory(backend, config)
    )
    steps = []
    try:
        for count in counts:
            console.print(f"[dim]{count} sessions...[/dim]")
            result = await step(manager, [f"scale-{i:02d}" for i in range(count)], rounds)
            console.print(f"[dim]  all ready in {result.all_ready_s:.1f} s[/dim]")
            for why in result.failed:
                console.print(f"[yellow]  a start failed: {why}[/yellow]")
            steps.append(result)
    finally:
        with anyio.CancelScope(shield=True):
            await manager.close_all("the benchmark ended")
            await backend.reap_networks()
            await backend.close()
    return steps


HEADERS = (
    "sessions",
    "started",
    "all ready s",
    "kiosk MiB p50 / max",
    "proxy MiB p50",
    "per session MiB p50",
    "screenshot p50 / p95 ms",
    "click p50 / p95 ms",
    "navigated",
)


def table_rows(steps: Sequence[Step]) -> list[list[str]]:
    rows = []
    for s in steps:
        per = [k + p for k, p in zip(s.kiosk_mib, s.proxy_mib, strict=True)]
        rows.append(
            [
                str(s.sessions),
                str(s.sessions - len(s.failed)),
                f"{s.all_ready_s:.1f}",
                f"{statistics.median(s.kiosk_mib):.0f} / {max(s.kiosk_mib):.0f}",
                f"{statistics.median(s.proxy_mib):.0f}",
                f"{statistics.median(per):.0f}",
                f"{nearest_rank(s.shot_ms, 50):.0f} / {nearest_rank(s.shot_ms, 95):.0f}",
                f"{nearest_rank(s.click_ms, 50):.0f} / {nearest_rank(s.click_ms, 95):.0f}",
                f"{s.navigated}/{s.sessions - len(s.failed)}",
            ]
        )
    return rows


def markdown_section(steps: Sequence[Step], machine_text: str, command: str, rounds: int) -> str:
    start, end = f"<!-- bench:{SECTION}:start -->", f"<!-- bench:{SECTION}:end -->"
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---:|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(steps)]
    table = "\n".join(lines)
    table += "".join(
        f"\n\n- {s.sessions} sessions: a start failed: {why[:300]}"
        for s in steps
        for why in s.failed
    )
    return f"""{start}
## Scale: concurrent kiosk sessions with allowlists

N agents, each allowed one local HTTPS site, start a kiosk session at the same moment
through the gateway's handler (`SessionManager.handle` in the benchmark's process: the same
checks, kiosk containers, session networks, INPUT rules and egress proxies as `corral
gateway`; the MCP front and the loopback hop are measured in the sections above). No warm
pool. "all ready": from the N concurrent starts to the last answer. Memory: each
container's cgroup (`memory.usage_in_bytes` minus `total_inactive_file`, as `docker stats`),
idle on about:blank once all are ready; a session is its kiosk plus its proxy. Then
{rounds} rounds in which every session at once takes a screenshot and clicks (p50/p95 over
all of them), and one navigation per session to the site through its proxy. Starts and
screenshots take the host's slots (`orchestrator/backends/admission.py`: two per core at
once, the rest queued in order, each deadline counted from the slot), so "all ready" and
the screenshot times include that queue. Targets (issue 23 item 7): an idle kiosk <= 130
MiB; 60 sessions started at once all answer a screenshot. The
{max(s.sessions for s in steps)}-session step loads this 2-core machine far past its
cores: the latencies there are what one agent sees when all the others act at the same
instant.

Command (from the repository root):

```sh
{command}
```

{machine_text}

{table}
{end}"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, nargs="+", default=list(DEFAULT_SESSIONS))
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--write", metavar="PATH")
    args = parser.parse_args(argv)
    if args.rounds < 1 or any(not 1 <= n <= 64 for n in args.sessions):
        parser.error("--rounds >= 1 and each --sessions value 1-64")
    machine = describe_machine()
    me = os.getpid()
    owners: list[tuple[int, int | None]] = [(me, owner_start_time(me))]
    with tempfile.TemporaryDirectory(prefix="corral-bench-scale-") as tmp, heavy_site() as site:
        home = CorralHome(Path(tmp) / "home", env=Environment.from_environ(os.environ))
        prepare(home, site.ca_file, site.ip, max(args.sessions))
        try:
            steps = anyio.run(measure, home, args.sessions, args.rounds)
        except BaseException:
            with contextlib.suppress(BenchError):
                check_leftovers(owners)
            raise
        check_leftovers(owners)
    table = Table(title="kiosk sessions with allowlists, at once")
    for header in HEADERS:
        table.add_column(header, justify="right")
    for row in table_rows(steps):
        table.add_row(*row)
    console.print(table)
    if args.write is not None:
        argv_ = [".venv/bin/python", "bench/scale.py", "--sessions"]
        argv_ += [str(n) for n in args.sessions] + ["--rounds", str(args.rounds)]
        command = shlex.join([*argv_, "--write", args.write])
        section = markdown_section(steps, machine_paragraph(machine), command, args.rounds)
        write_section(Path(args.write), SECTION, section)
        console.print(f"wrote the section to {args.write}")
    return 0


if __name__ == "__main__":
    run_main(main, console)
