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
channel (orchestrator.backends.channel.KioskChannel: JSON lines on the attached
stdin/stdout, no MCP, no gateway), which shows what MCP + the gateway add.

Measured, p50/p95/min in ms:

1. session start to first screenshot (`computer_session_start` + `computer_screenshot`;
   for the kiosk channel: create/attach/start the container, op `start`, op `screenshot`);
2. screenshot round trip at 1280x800;
3. click round trip at (640, 400);
4. screenshot of a heavy page (bench/computer_use_site.py: 50 inputs, 5 of them secret,
   3 iframes, one shadow root) through MCP: a second agent "bench-web" whose
   allowed_domains is the site's name opens it with `computer_navigate` from a local HTTPS
   site container (tests/sites.py); the kiosk channel and docker exec take the same page
   as a data: URL; and the kiosk agent's op `probe` alone on it (a screenshot runs two).

Steady-state rounds are interleaved: WARMUP uncounted rounds, then --runs timed rounds,
each running every (operation, path) once, paths in rotating order.

Every container this script or its gateway starts is removed at the end; the script fails
if one is left (only containers whose owner is this process or its gateway are looked at,
and the site containers labelled with this process's pid: other people's containers on the
same engine are never touched).

This file is the command: the CORRAL_HOME, the gateway, the measuring rounds and main.
The settings, the rows and the three paths are in bench/computer_use_paths.py; the
machine description, the leftover check and the report in bench/computer_use_report.py;
the heavy page and its site in bench/computer_use_site.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import time
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from _common import BenchError, local_backend, run_main, write_section
from computer_use_paths import (
    AGENT,
    CHANNEL,
    CLICK,
    EXEC_CLICK,
    EXEC_SHOT,
    FREE_AGENT,
    HEAVY,
    MAX_ACTIONS,
    MCP,
    MCP_FREE,
    PROBE,
    ROWS,
    SECTION,
    SHOT,
    START,
    START_WARMUP,
    WARMUP,
    WEB_AGENT,
    ChannelPath,
    ExecPath,
    McpPath,
    Observations,
    Result,
    RowKey,
    TimedCall,
    console,
    key,
    started_kiosk,
)
from computer_use_report import check_leftovers, describe_machine, markdown_section, print_report
from computer_use_site import HEAVY_URL, SECRET_FIELDS, SITE, HeavySite, heavy_data_url, heavy_site
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from orchestrator.backends.owner import read_start_time as owner_start_time
from orchestrator.config import AgentConfig, load_config, render_new_agent
from orchestrator.home import CorralHome, Environment

REPO = Path(__file__).resolve().parents[1]
CORRAL_BIN = REPO / ".venv" / "bin" / "corral"

DEFAULT_RUNS = 30
DEFAULT_STARTS = 5

GATEWAY_READY_S = 30.0
GATEWAY_STOP_S = 30.0


# --- the CORRAL_HOME and the gateway --------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agent_toml(
    name: str = AGENT, allowed_domains: Sequence[str] = (), *, rules: bool = True
) -> str:
    """The rendered template with computer_use on, a large action budget and
    `allowed_domains` (none: the session has no network); without `rules`, no confirm
    words or URLs (no click reads its target first, and none is held)."""
    replacements = {
        "computer_use": "true",
        "max_actions": str(MAX_ACTIONS),
        "allowed_domains": json.dumps(list(allowed_domains)),
    }
    lines = render_new_agent(name).splitlines()
    for name, value in replacements.items():
        hits = [i for i, line in enumerate(lines) if line.split("=")[0].strip() == name]
        if len(hits) != 1:
            raise BenchError(f"the agent template has {len(hits)} `{name} = ...` lines, not 1")
        lines[hits[0]] = f"{name} = {value}"
    text = "\n".join(lines) + "\n"
    if not rules:
        header = "[capabilities.computer_use_config]\n"
        text = text.replace(header, header + "confirm_words = []\nconfirm_urls = []\n", 1)
    cfg = AgentConfig.model_validate(tomllib.loads(text)).capabilities
    cu = cfg.computer_use_config
    if (
        not cfg.computer_use
        or cu.max_actions != MAX_ACTIONS
        or list(cu.allowed_domains) != list(allowed_domains)
        or (not rules and (cu.confirm_words or cu.confirm_urls))
    ):
        raise BenchError("the rewritten agent.toml does not say what the benchmark needs")
    return text


def prepare_home(home: CorralHome, port: int, site: HeavySite) -> None:
    """config.toml: the gateway port, and the kiosk trusting the site's CA with SITE mapped
    to the site container; agents AGENT (no network), WEB_AGENT (may open SITE) and
    FREE_AGENT (no network, no confirm rules)."""
    home.ensure()
    home.config_file.write_text(
        f"[gateway]\nport = {port}\n\n[container.kiosk]\n"
        f"extra_ca_file = {json.dumps(str(site.ca_file))}\n"
        f"resolve_overrides = {{ {json.dumps(SITE)} = {json.dumps(site.ip)} }}\n",
        encoding="utf-8",
    )
    config = load_config(home.config_file)
    kiosk = config.container.kiosk
    if (
        config.gateway.port != port
        or kiosk.extra_ca_file != str(site.ca_file)
        or dict(kiosk.resolve_overrides) != {SITE: site.ip}
    ):
        raise BenchError("config.toml does not carry the gateway port and the heavy page's site")
    agents = ((AGENT, (), True), (WEB_AGENT, (SITE,), True), (FREE_AGENT, (), False))
    for name, domains, rules in agents:
        path = home.agent_file(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(agent_toml(name, domains, rules=rules), encoding="utf-8")


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
def running_gateway(
    home: CorralHome,
    port: int,
    log_path: Path,
    *,
    own_session: bool = False,
    while_stopping: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> Iterator[Gateway]:
    """`corral gateway` on `port`, healthy; SIGTERM and wait on exit (SIGKILL if stuck).
    `own_session`: its own process session, so a Ctrl-C reaches only this process;
    `while_stopping`: a context held around the stop (e.g. one that ignores SIGINT)."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [corral_bin(), "gateway"],
            env=corral_env(home),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=own_session,
        )
    gateway = Gateway(proc, owner_start_time(proc.pid), f"http://127.0.0.1:{port}", log_path)
    try:
        wait_healthy(gateway)
        yield gateway
    finally:
        with while_stopping():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=GATEWAY_STOP_S)
            except subprocess.TimeoutExpired:
                console.print("[yellow]the gateway ignored SIGTERM; killing it[/yellow]")
                proc.kill()
                proc.wait()


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


def mcp_params(home: CorralHome, agent: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=corral_bin(), args=["mcp", "--agent", agent], env=corral_env(home)
    )


@contextlib.asynccontextmanager
async def session_of(mcp: McpPath) -> AsyncIterator[McpPath]:
    """A kiosk session through MCP for the block, stopped after it."""
    await mcp.start()
    try:
        yield mcp
    except BaseException:
        # Best effort: the first failure is the one to report, and stopping the gateway
        # ends the session anyway.
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await mcp.stop()
        raise
    await mcp.stop()


async def open_heavy_page(web: McpPath, channel: ChannelPath) -> None:
    """The MCP session opens the heavy page from the site, the kiosk channel the same page
    as a data: URL; both must see its SECRET_FIELDS secret fields, or nothing is timed. (A
    masked field can count twice through MCP: the DOM probe and its AT-SPI cross-check each
    report the password fields, a pixel apart, and the gateway paints both.)"""
    await web.navigate(HEAVY_URL)
    await web.screenshot(-1)
    masked, rects = web.obs.mcp_masked[-1], web.obs.masked_fields[-1]
    if masked or rects < SECRET_FIELDS:
        raise BenchError(
            f"the heavy page through MCP: {rects} field rectangle(s) masked, the whole image "
            f"masked: {masked}; expected at least {SECRET_FIELDS} fields: "
            f"{sorted(web.obs.mask_notes)}"[:600]
        )
    await channel.navigate(heavy_data_url())
    await channel.probe(-1)
    found = channel.obs.probe_fields[-1]
    if found != SECRET_FIELDS or channel.obs.probe_errors:
        raise BenchError(
            f"the heavy page on the kiosk channel: the probe found {found} secret field(s), "
            f"expected {SECRET_FIELDS}; errors: {sorted(channel.obs.probe_errors)}"
        )


async def measure(
    home: CorralHome, runs: int, starts: int, obs: Observations, heavy: Observations
) -> list[Result]:
    """Every row's samples; `obs` records the about:blank calls, `heavy` the heavy page's."""
    samples: dict[RowKey, list[float]] = {key(row): [] for row in ROWS}
    backend = local_backend()
    try:
        async with (
            Client(mcp_params(home, AGENT), mode="legacy") as client,
            Client(mcp_params(home, FREE_AGENT), mode="legacy") as free_client,
        ):
            mcp, free = McpPath(client, obs), McpPath(free_client, obs)
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
            async with started_kiosk(backend, obs) as kiosk:
                channel.channel = kiosk
                reference.container_id = kiosk.id
                clicks = [(CLICK, MCP), (CLICK, MCP_FREE), (CLICK, CHANNEL), (CLICK, EXEC_CLICK)]
                async with session_of(mcp), session_of(free):
                    await rounds(
                        {
                            (SHOT, MCP): mcp.screenshot,
                            (SHOT, CHANNEL): channel.screenshot,
                            (SHOT, EXEC_SHOT): reference.screenshot,
                            (CLICK, MCP): mcp.click,
                            (CLICK, MCP_FREE): free.click,
                            (CLICK, CHANNEL): channel.click,
                            (CLICK, EXEC_CLICK): reference.click,
                        },
                        [
                            [(SHOT, MCP), (SHOT, CHANNEL), (SHOT, EXEC_SHOT)],
                            clicks,
                        ],
                        WARMUP,
                        runs,
                        samples,
                    )
                console.print(
                    f"[dim]the heavy page: {WARMUP} warm-up + {runs} timed rounds of "
                    f"screenshot (agent {WEB_AGENT}, {HEAVY_URL}) and probe...[/dim]"
                )
                checks = Observations()  # the calls that check the page, not reported
                channel.obs = checks
                async with (
                    Client(mcp_params(home, WEB_AGENT), mode="legacy") as web_client,
                    session_of(McpPath(web_client, checks)) as web,
                ):
                    await open_heavy_page(web, channel)
                    web.obs = channel.obs = reference.obs = heavy
                    heavy_shot = [(HEAVY, MCP), (HEAVY, CHANNEL), (HEAVY, EXEC_SHOT)]
                    await rounds(
                        {
                            (HEAVY, MCP): web.screenshot,
                            (HEAVY, CHANNEL): channel.screenshot,
                            (HEAVY, EXEC_SHOT): reference.screenshot,
                            (PROBE, CHANNEL): channel.probe,
                        },
                        [[*heavy_shot, (PROBE, CHANNEL)]],
                        WARMUP,
                        runs,
                        samples,
                    )
                channel.channel = None
    finally:
        with anyio.CancelScope(shield=True):
            await backend.close()
    return [Result(row, tuple(samples[key(row)])) for row in ROWS]


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
    obs, heavy = Observations(), Observations()
    me = os.getpid()
    owners: list[tuple[int, int | None]] = [(me, owner_start_time(me))]
    # The site goes last: its containers are removed after the gateway has stopped.
    with tempfile.TemporaryDirectory(prefix="corral-bench-cu-") as tmp, heavy_site() as site:
        console.print(f"[dim]the heavy page's site at {site.ip} ({HEAVY_URL})[/dim]")
        home = CorralHome(Path(tmp).resolve() / "home", env=Environment.from_environ(os.environ))
        port = free_port()
        prepare_home(home, port, site)
        try:
            with running_gateway(home, port, Path(tmp) / "gateway.log") as gateway:
                owners.append((gateway.proc.pid, gateway.start_time))
                console.print(f"[dim]corral gateway (pid {gateway.proc.pid}) at {gateway.url}[/]")
                results = anyio.run(measure, home, runs, starts, obs, heavy)
        except BaseException:
            with contextlib.suppress(BenchError):  # the first failure is the one to report
                check_leftovers(owners)
            raise
        # The leak check comes before --write: figures from a run that leaks are not published.
        check_leftovers(owners)
    console.print("no container of this benchmark, its gateway or its site left behind")
    print_report(machine, results, obs, heavy)
    if args.write is not None:
        section = markdown_section(
            machine, results, obs, heavy, runs, canonical_command(runs, starts, args.write)
        )
        write_section(Path(args.write), SECTION, section)
        console.print(f"wrote the section to {args.write}")
    return 0


if __name__ == "__main__":
    run_main(main, console)
