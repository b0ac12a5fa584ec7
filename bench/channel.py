"""A long-lived container's channel: the engine's attach against the channel's own unix
socket (issue 23, items 6 and 9; docs/kiosk-internals.md, "The channel's own socket").

Two stand-in agents from the sandbox image answer each request line at once, one on its
attach stream and one on its own socket (taken by rig_images/channel_socket.py's code), both
opened by corral's Docker backend and driven by its `KioskChannel`, alternating request by
request. Three conditions: back to back; after a 50 ms pause (every process on the way
asleep); and while other containers start and stop beside them (two threads running
`docker run --rm` of the sandbox image in a loop: dockerd busy, as in the soak's scripts
window). Run from the repository root:

    .venv/bin/python bench/channel.py [--runs 300] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import docker
from _common import BenchError, local_backend, nearest_rank, publish, run_main, runs_and_write
from rich.console import Console

from orchestrator.backends.channel import KioskChannel
from orchestrator.config import image_name
from orchestrator.home import Environment
from sandboxes.isolation import locked_down
from sandboxes.ports import ContainerBackend

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the stand-in's command lives in tests/
from tests.kiosk_helpers import taking_the_socket  # noqa: E402

console = Console()
IMAGE = image_name("sandbox", Environment.from_environ(os.environ).image_tag)
PAUSE_S = 0.05
ECHO = """
import json, sys
for raw in sys.stdin:
    sys.stdout.write(json.dumps({"id": json.loads(raw)["id"], "ok": True}) + "\\n")
    sys.stdout.flush()
"""


async def open_agent(backend: ContainerBackend, socket: bool) -> KioskChannel:
    echo = ("python3", "-c", ECHO)
    command = taking_the_socket(echo) if socket else echo
    spec = locked_down(
        image=IMAGE,
        command=command,
        labels=backend.labels(kind="bench-channel", agent="bench", session="channel"),
        stdin_open=True,
        channel_socket=socket,
    )
    return await KioskChannel.open(backend, spec)


@contextmanager
def churn(image: str) -> Iterator[None]:
    """Containers started and removed beside the measurement, two at a time."""
    client, stop = docker.from_env(), threading.Event()

    def loop() -> None:
        while not stop.is_set():
            client.containers.run(image, ["true"], remove=True, network_mode="none")

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        client.close()


async def sample(
    channels: dict[str, KioskChannel], runs: int, pause: float
) -> dict[str, list[float]]:
    """Round trips (µs) of each channel, alternating, `pause` seconds before each."""
    found: dict[str, list[float]] = {name: [] for name in channels}
    for _ in range(runs):
        for name, channel in channels.items():
            if pause:
                time.sleep(pause)  # the whole process quiet, as an agent between calls
            began = time.perf_counter()
            await channel.request("echo", 10)
            found[name].append((time.perf_counter() - began) * 1e6)
    return found


async def measure(runs: int) -> list[str]:
    backend = local_backend()
    rows = []
    try:
        channels = {
            "engine attach": await open_agent(backend, socket=False),
            "own unix socket": await open_agent(backend, socket=True),
        }
        try:
            await sample(channels, 20, 0)  # warm both
            for label, pause, beside in (
                ("back to back", 0.0, False),
                (f"after a {PAUSE_S * 1000:.0f} ms pause", PAUSE_S, False),
                ("containers starting beside, after a pause", PAUSE_S, True),
            ):
                if beside:
                    with churn(IMAGE):
                        found = await sample(channels, runs, pause)
                else:
                    found = await sample(channels, runs, pause)
                for name, xs in found.items():
                    rows.append(
                        f"| {label} | {name} | {len(xs)} | {nearest_rank(xs, 50):.0f} | "
                        f"{nearest_rank(xs, 95):.0f} | {min(xs):.0f} |"
                    )
        finally:
            for channel in channels.values():
                await channel.close()
    finally:
        await backend.close()
    return rows


def main() -> int:
    args = runs_and_write(None, __doc__, 300, "round trips per channel and condition (300)")
    rows = anyio.run(measure, args.runs)
    if not rows:
        raise BenchError("no sample")
    section = "\n".join(
        [
            "<!-- bench:channel:start -->",
            "## A container's channel: the engine's attach against its own socket",
            "",
            "Command: `.venv/bin/python bench/channel.py --write docs/benchmarks.md`. "
            "One request and its answer line through corral's `KioskChannel`, to a stand-in "
            "agent that answers at once, opened by corral's Docker backend on the attach and "
            "on the channel's own socket, alternating request by request; µs.",
            "",
            "| condition | channel | n | p50 µs | p95 µs | min µs |",
            "|---|---|---|---|---|---|",
            *rows,
            "<!-- bench:channel:end -->",
        ]
    )
    publish(console, section, args.write, "channel")
    return 0


if __name__ == "__main__":
    run_main(main, console)
