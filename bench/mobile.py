"""Benchmark: mobile_use and ios_use tap and screenshot round trips through corral's MCP
front, against the simulators of tests/simulators/, next to the stock way of doing the
same on Android: `adb shell input tap` / `adb exec-out screencap -p` spawned per action.

Run from the repository root:

    .venv/bin/python bench/mobile.py [--runs 20] [--write docs/benchmarks.md]

The real path: a throwaway CORRAL_HOME, `corral gateway` as a subprocess (its own adb
server, private unix socket), `corral mcp --agent bench-mobile` over stdio (the 2.x SDK's
Client); the fake adbd (ADB wire protocol) and the fake WebDriverAgent (HTTP) run in this
process. The spawned-adb baseline uses a second adb server of its own (another private
socket) attached to the same fake device. Rounds are interleaved (each round runs every
path once, in rotating order) after WARMUP uncounted rounds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import adbutils
import anyio
from _common import BenchError, NamedTimings, latency_table, publish, run_main
from computer_use import free_port, mcp_params, running_gateway
from computer_use_paths import console
from mcp import Client

from orchestrator.config import AndroidRigConfig, render_new_agent
from orchestrator.home import CorralHome, Environment
from orchestrator.surfaces.android.adb import AdbServer
from orchestrator.surfaces.android.rig import DUMP_PATH

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the simulators live in tests/
from tests.simulators import fake_wda  # noqa: E402
from tests.simulators.fake_adbd import FakeAdbd  # noqa: E402

AGENT = "bench-mobile"
FREE_AGENT = "bench-mobile-free"  # the same with no confirm words or URLs: taps read no target
WARMUP = 3
SECTION = "mobile"


Row = NamedTimings


def prepare(home: CorralHome, port: int, serial: str, wda_url: str) -> None:
    home.ensure()
    home.config_file.write_text(
        f'[gateway]\nport = {port}\n\n[rigs.android]\ndevices = ["{serial}"]\n\n'
        f'[rigs.ios]\nwda_url = "{wda_url}"\n'
    )
    for name, rules in ((AGENT, True), (FREE_AGENT, False)):
        text = render_new_agent(name).replace("mobile_use = false", "mobile_use = true")
        text = text.replace("ios_use = false", "ios_use = true")
        text = text.replace("max_actions = 50\n", "max_actions = 10000\n")
        if not rules:
            header = "[capabilities.computer_use_config]\n"
            if header not in text:
                raise BenchError(f"the agent template has no {header.strip()} table")
            text = text.replace(header, header + "confirm_words = []\nconfirm_urls = []\n", 1)
        path = home.agent_file(name)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(text)


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise BenchError(f"{tool} {arguments} failed: {result.content}")
    return result


async def timed(action: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await action()
    return (time.perf_counter() - started) * 1000


def spawned(socket: Path, serial: str, *args: str) -> Callable[[], Awaitable[Any]]:
    """One `adb -L localfilesystem:SOCKET -s SERIAL ...` process per action, its output
    read whole."""
    argv = [adbutils.adb_path(), "-L", f"localfilesystem:{socket}", "-s", serial, *args]

    async def run() -> None:
        done = await anyio.run_process(argv, check=False)
        if done.returncode != 0 or (args[0] == "exec-out" and not done.stdout):
            raise BenchError(f"{argv} failed: {done.stderr!r}")

    return run


def in_turn(*steps: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
    async def run() -> None:
        for step in steps:
            await step()

    return run


async def measure(client: Client, baseline: Path, serial: str, runs: int) -> list[Row]:
    # first calls start the rigs (lease, adb server, WDA session): not counted
    await call(client, "mobile_use", verb="screenshot")
    await call(client, "ios_use", verb="screenshot")
    paths: dict[str, Callable[[], Awaitable[Any]]] = {
        "mobile_use tap (MCP)": lambda: call(client, "mobile_use", verb="tap", x=10, y=10),
        "adb shell input tap, spawned": spawned(
            baseline, serial, "shell", "input", "tap", "10", "10"
        ),
        "mobile_use screenshot (MCP, masked)": lambda: call(
            client, "mobile_use", verb="screenshot"
        ),
        "adb exec-out screencap -p, spawned": spawned(
            baseline, serial, "exec-out", "screencap", "-p"
        ),
        "adb screencap + a UI dump (uiautomator dump, cat), spawned": in_turn(
            spawned(baseline, serial, "exec-out", "screencap", "-p"),
            spawned(baseline, serial, "shell", "uiautomator", "dump", DUMP_PATH),
            spawned(baseline, serial, "shell", "cat", DUMP_PATH),
        ),
        "ios_use tap (MCP)": lambda: call(client, "ios_use", verb="tap", x=10, y=10),
        "ios_use screenshot (MCP, masked)": lambda: call(client, "ios_use", verb="screenshot"),
    }
    samples: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for index in range(WARMUP + runs):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            ms = await timed(paths[name])
            if index >= WARMUP:
                samples[name].append(ms)
    await call(client, "rig_close")
    return [Row(name, tuple(samples[name])) for name in names]


async def measure_free(client: Client, runs: int) -> list[Row]:
    """The taps of an agent with no confirm rules (no target read before a tap), after
    `measure` closed its rigs (one lease of the device at a time)."""
    await call(client, "mobile_use", verb="screenshot")
    await call(client, "ios_use", verb="screenshot")
    paths: dict[str, Callable[[], Awaitable[Any]]] = {
        "mobile_use tap (MCP, no confirm rules)": lambda: call(
            client, "mobile_use", verb="tap", x=10, y=10
        ),
        "ios_use tap (MCP, no confirm rules)": lambda: call(
            client, "ios_use", verb="tap", x=10, y=10
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for index in range(WARMUP + runs):
        for name in names[index % 2 :] + names[: index % 2]:
            ms = await timed(paths[name])
            if index >= WARMUP:
                samples[name].append(ms)
    await call(client, "rig_close")
    return [Row(name, tuple(samples[name])) for name in names]


def markdown(rows: Sequence[Row], runs: int) -> str:
    lines = [
        f"<!-- bench:{SECTION}:start -->",
        "## mobile_use / ios_use: tap and screenshot round trips (simulators)",
        "",
        f"Command: `.venv/bin/python bench/mobile.py --runs {runs} --write docs/benchmarks.md`."
        " Against tests/simulators/ (the fake adbd behind a real adb server; the fake "
        "WebDriverAgent), through corral's MCP front over stdio and the gateway. A "
        "screenshot through corral reads the UI tree before and after the capture to mask "
        "secret fields (5 device calls on Android); the spawned-adb rows are one `adb` "
        "process per action against an adb server of their own, unmasked (the screencap "
        "plus UI dump row is what a client that masks must read at least: the image and "
        "one UI tree, three processes). Agent "
        f"`{AGENT}` keeps the template's confirm words, so a tap first reads the element at "
        f"its point for the approval rules; the `no confirm rules` rows are agent "
        f"`{FREE_AGENT}` (`confirm_words = []`, `confirm_urls = []`), measured right after "
        "the others' rigs are closed (one lease of a device at a time): every stage of the "
        "action pipeline but that read.",
        "",
        *latency_table(rows),
    ]
    lines.append(f"<!-- bench:{SECTION}:end -->")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--write", default=None)
    args = parser.parse_args(argv)
    wda = fake_wda.serve(fake_wda.FakeWda())
    try:
        with tempfile.TemporaryDirectory(prefix="corral-bench-mobile-") as tmp, FakeAdbd() as adbd:
            serial = f"127.0.0.1:{adbd.port}"
            home = CorralHome(root=Path(tmp) / "home", env=Environment.from_environ(os.environ))
            port = free_port()
            prepare(home, port, serial, wda.url)
            baseline = AdbServer(AndroidRigConfig(devices=[serial]))
            with running_gateway(home, port, Path(tmp) / "gateway.log"):
                params = mcp_params(home, AGENT)

                async def run() -> list[Row]:
                    await baseline.states()  # its own adb server, attached to the fake
                    try:
                        assert baseline.socket_path is not None
                        async with Client(params, mode="legacy") as client:
                            rows = await measure(client, baseline.socket_path, serial, args.runs)
                        free = mcp_params(home, FREE_AGENT)
                        async with Client(free, mode="legacy") as client:
                            return rows + await measure_free(client, args.runs)
                    finally:
                        await baseline.close()

                rows = anyio.run(run)
    finally:
        fake_wda.stop(wda)
    section = markdown(rows, args.runs)
    publish(console, section, args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, console)
