"""Benchmark: one codrive step per rung through corral's MCP front, against the way peers
drive a desktop (a screenshot, then `docker exec xdotool` for the click), in the same run.

Run from the repository root:

    .venv/bin/python bench/codrive.py [--runs 20] [--write docs/benchmarks.md]

The real path: a throwaway CORRAL_HOME, `corral gateway` as a subprocess, `corral mcp
--agent bench-codrive` over stdio, the agent's desktop rig with the real galculator.
Measured, p50/p95/min in ms, per `codrive_run` of one step on galculator's "7" button:

1. api_action: AT-SPI `press` on the named button;
2. locate: the AT-SPI lookup of (button, "7"), then a click at its centre;
3. x/y: the literal coordinates (the last rung);
each including the deny-list check, the effect check (the app's accessibility events and
window pixels, waited for up to 400 ms) and the answer;
4. the peers' way: a `computer_use screenshot` (to find the button) plus `docker exec
   xdotool mousemove X Y click 1` in the rig's container, timed together;
5. freeze: a person's key through the console's live view (RFB over the gateway's
   WebSocket bridge) until the console reports the seat taken (then hand back).

Rounds are interleaved after WARMUP uncounted rounds. The gateway's stop removes every
container.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from _common import BenchError, NamedTimings, latency_table, publish, run_main
from computer_use import free_port, mcp_params, running_gateway
from computer_use_paths import console
from mcp import Client

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome, Environment

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the console helpers live in tests/
from tests.e2e.gateways import add_operator  # noqa: E402
from tests.e2e.person import console_login, live_view  # noqa: E402

AGENT = "bench-codrive"
WARMUP = 3
SECTION = "codrive"
SEVEN = {"action": "click", "role": "button", "name": "7"}


Row = NamedTimings


def prepare(home: CorralHome, port: int) -> None:
    home.ensure()
    home.config_file.write_text(f"[gateway]\nport = {port}\n")
    text = render_new_agent(AGENT).replace("codrive = false", "codrive = true")
    text = text.replace("desktop_use = false", "desktop_use = true")
    text = text.replace("max_actions = 50\n", "max_actions = 10000\n")
    path = home.agent_file(AGENT)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text)


async def step(client: Client, one: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool("codrive_run", {"target_app": "galculator", "steps": [one]})
    data = dict(result.structured_content or {})
    if result.is_error or data.get("state") != "finished":
        raise BenchError(f"codrive_run {one} did not finish: {result.content}")
    return data


async def timed(action: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await action()
    return (time.perf_counter() - started) * 1000


def rig_container() -> str:
    """The codrive rig's container: the desktop rig whose galculator runs (the desktop
    pool's idle member, also labelled rig-desktop, runs none)."""
    found = subprocess.run(
        ["docker", "ps", "-q", "--filter", "label=corral.kind=rig-desktop"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    running = [c for c in found if "galculator" in docker_top(c)]
    if len(running) != 1:
        raise BenchError(f"expected one desktop rig running galculator, found {running} of {found}")
    return running[0]


def docker_top(container: str) -> str:
    top = subprocess.run(["docker", "top", container], capture_output=True, text=True)
    return top.stdout if top.returncode == 0 else ""


async def measure(client: Client, runs: int, base: str, token: str) -> list[Row]:
    located = await step(client, SEVEN)
    if located["steps"][0]["rung"] != "locate":
        raise BenchError(f"the locate rung did not act: {located}")
    x, y = located["steps"][0]["at"]
    container = rig_container()
    press = {**SEVEN, "api_action": "press", "params": {"name": "7", "role": "button"}}
    xy = {"action": "click", "x": x, "y": y}

    async def peers() -> None:
        shot = await client.call_tool("computer_use", {"verb": "screenshot"})
        if shot.is_error:
            raise BenchError(f"screenshot failed: {shot.content}")
        argv = ["docker", "exec", "-u", "1000", "-e", "DISPLAY=:99", container, "xdotool"]
        await anyio.run_process([*argv, "mousemove", str(x), str(y), "click", "1"])

    async def rung(one: dict[str, Any], name: str) -> None:
        done = await step(client, one)
        if done["steps"][0]["rung"] != name:
            raise BenchError(f"expected rung {name}: {done}")

    paths: dict[str, Callable[[], Awaitable[None]]] = {
        "codrive step, api_action (AT-SPI press)": lambda: rung(press, "api_action"),
        "codrive step, locate (AT-SPI) + click": lambda: rung(SEVEN, "locate"),
        "codrive step, x/y click": lambda: rung(xy, "xy"),
        "peers: screenshot + docker exec xdotool click": peers,
    }
    samples: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    for index in range(WARMUP + runs):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            ms = await timed(paths[name])
            if index >= WARMUP:
                samples[name].append(ms)
    rows = [Row(name, tuple(samples[name])) for name in names]
    rows.append(Row("freeze: a person's key to the seat taken", await freezes(base, token, runs)))
    return rows


async def freezes(base: str, token: str, runs: int) -> tuple[float, ...]:
    out = []
    async with console_login(base, token) as web:
        state = (await web.get("/console/api/state")).json()
        (key,) = [s["agent"] for s in state["sessions"] if s["owner"] == AGENT]
        async with live_view(base, web, key) as person:
            for _ in range(runs):
                started = time.perf_counter()
                await person.press()
                while True:
                    rows = (await web.get("/console/api/state")).json()["sessions"]
                    if next(s for s in rows if s["agent"] == key)["controller"] == "human":
                        break
                out.append((time.perf_counter() - started) * 1000)
                done = subprocess.run(
                    [str(REPO / ".venv" / "bin" / "corral"), "sessions", "handback", key],
                    env={
                        **os.environ,
                        "CORRAL_HOME": os.environ["BENCH_HOME"],
                        "CORRAL_OPERATOR_TOKEN": token,  # an operator hands back
                    },
                    capture_output=True,
                    check=False,
                )
                if done.returncode != 0:
                    raise BenchError(f"hand back failed: {done.stderr!r}")
    return tuple(out)


def markdown(rows: Sequence[Row], runs: int) -> str:
    lines = [
        "<!-- bench:codrive:start -->",
        "## codrive: one step per rung, against a screenshot plus docker exec xdotool",
        "",
        f"Command: `.venv/bin/python bench/codrive.py --runs {runs} --write docs/benchmarks.md`. "
        'Each codrive row is one `codrive_run` of one step on galculator\'s "7" through the '
        "MCP front over stdio and the gateway (deny-list check, the rung, the effect check, "
        "the answer). The peers' row is how desktop agents commonly act: a screenshot to "
        "find the button, then `docker exec ... xdotool` to click it. Target: the AT-SPI "
        "locate step under 50 ms p50. The freeze row is a person's key through the console's "
        "live view until the console reports the seat taken (the AI's input is refused from "
        "then on).",
        "",
        *latency_table(rows),
    ]
    lines.append("<!-- bench:codrive:end -->")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--write", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="corral-bench-codrive-") as tmp:
        home = CorralHome(root=Path(tmp) / "home", env=Environment.from_environ(os.environ))
        port = free_port()
        prepare(home, port)
        token = add_operator(home, "bench-operator")
        os.environ["BENCH_HOME"] = str(home.root)
        with running_gateway(home, port, Path(tmp) / "gateway.log") as gateway:
            params = mcp_params(home, AGENT)

            async def run() -> list[Row]:
                async with Client(params, mode="legacy") as client:
                    return await measure(client, args.runs, gateway.url, token)

            rows = anyio.run(run)
    section = markdown(rows, args.runs)
    publish(console, section, args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, console)
