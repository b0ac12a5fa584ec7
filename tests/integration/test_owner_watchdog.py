"""The owner watchdog (`orchestrator.backends.docker.watchdog`) with a create in flight when
its owner is SIGKILLed: the engine answers that create after the watchdog's sweep listed the
owner's containers, and the container it makes is removed (and audited) all the same.

The owner is a real process creating through `DockerBackend`; the engine is the real one,
behind `HeldCreates`, which only holds the owner's second create until the test lets it go
(an engine slow to answer, as under load). Without the in-flight announcements the late
container outlived its owner, with no process left to remove it. The owner's containers carry
another host's label, so the orphan reapers of gateways that other tests start beside this
one never remove them first.

And while a dead owner's watchdog runs, another reaper on the engine (another corral home's
gateway) leaves its containers to it, so each is audited in its owner's own audit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from orchestrator.audit import AuditLog
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.owner import LABEL_INSTANCE, Owner
from orchestrator.backends.reaper import reap_orphans
from tests.helpers import wait_until
from tests.integration.held_creates import HeldCreates

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
OWNER = """
import dataclasses, sys, anyio
from pathlib import Path
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.owner import Owner
from sandboxes.script_policy import build_script_spec

url, image, audit, workspace, pause, host = sys.argv[1:7]

async def main():
    # Another host's label (unless `host` is "this"): the orphan reapers of the gateways
    # other tests start leave its containers alone (not theirs to judge).
    owner = Owner.current()
    if host != "this":
        owner = dataclasses.replace(owner, host=host)
    backend = DockerBackend(owner, url, Path(audit))
    await backend.ensure_watchdog()

    def spec(session):
        labels = backend.labels(kind="script", agent="late-owner", session=session)
        return build_script_spec(image=image, language=None, workspace_dir=workspace,
                                 user="1000", labels=labels, tmp_size_mb=8)

    await anyio.to_thread.run_sync(backend.create_now, spec("first"))
    print(backend.owner.instance_id, flush=True)
    if pause == "pause":
        sys.stdin.readline()  # killed here: no create in flight
    await anyio.to_thread.run_sync(backend.create_now, spec("late"))  # held, then killed
    print("the late create was answered", flush=True)

anyio.run(main)
"""


@pytest.fixture
def owner_of(tmp_path: Path, sandbox_image: str) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(
        url: str, audit: Path, pause: bool = False, host: str = "watchdog-test-host"
    ) -> subprocess.Popen[bytes]:
        args = [url, sandbox_image, str(audit), str(tmp_path), "pause" if pause else "go", host]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-c", OWNER, *args],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def reaped(audit: Path) -> list[str]:
    events = AuditLog(audit).read() if audit.exists() else []
    return [e["details"]["session"] for e in events if e["event"] == "container_reaped"]


def watchdog_pid(instance: str) -> int | None:
    """The pid of the watchdog of `instance`, while it runs (read from /proc)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"orchestrator.backends.docker.watchdog" in argv and instance.encode() in argv:
                return int(entry.name)
    return None


def watchdog_of(instance: str) -> bool:
    """Whether the watchdog of `instance` still runs."""
    return watchdog_pid(instance) is not None


async def test_a_create_in_flight_when_its_owner_dies_is_removed_once_it_lands(
    tmp_path: Path, docker_client: docker.DockerClient, owner_of: Any
) -> None:
    audit = tmp_path / "audit.jsonl"
    with HeldCreates(tmp_path / "engine.sock", let_through=1) as engine:
        owner = owner_of(engine.url, audit)
        instance = owner.stdout.readline().decode().strip()  # the first create answered
        assert instance
        assert engine.held.wait(60), "the owner's second create never reached the engine"
        owner.send_signal(signal.SIGKILL)  # mid-create: no cleanup code runs in the owner
        owner.wait()
        # The watchdog swept what the engine had: the first container.
        await wait_until(lambda: reaped(audit) == ["first"])
        mine = {"label": [f"{LABEL_INSTANCE}={instance}"]}
        assert not docker_client.containers.list(all=True, filters=mine)
        engine.release()  # the engine now answers the dead owner's create

        def explain() -> str:
            left = docker_client.containers.list(all=True, filters=mine)
            return (
                f"the late create not reaped: audit {reaped(audit)}, containers "
                f"{[(c.name, c.status) for c in left]}, watchdog running: "
                f"{watchdog_of(instance)}"
            )

        await wait_until(lambda: reaped(audit) == ["first", "late"], explain=explain)
        assert not docker_client.containers.list(all=True, filters=mine)
        await wait_until(lambda: not watchdog_of(instance))  # waiting for nothing more


async def test_a_watchdog_with_no_create_in_flight_sweeps_and_ends_at_once(
    tmp_path: Path, docker_client: docker.DockerClient, owner_of: Any
) -> None:
    """The owner died between creates (every create answered): nothing to wait for."""
    audit = tmp_path / "audit.jsonl"
    with HeldCreates(tmp_path / "engine.sock", let_through=1) as engine:
        owner = owner_of(engine.url, audit, pause=True)
        instance = owner.stdout.readline().decode().strip()
        assert instance
        owner.send_signal(signal.SIGKILL)  # waiting before its second create: none in flight
        owner.wait()
        await wait_until(lambda: not watchdog_of(instance))
        assert reaped(audit) == ["first"]
        mine = {"label": [f"{LABEL_INSTANCE}={instance}"]}
        assert not docker_client.containers.list(all=True, filters=mine)


async def test_a_dead_owners_container_is_left_to_its_running_watchdog_by_other_reapers(
    tmp_path: Path, docker_client: docker.DockerClient, owner_of: Any
) -> None:
    """Another corral home's reaper on the same engine (a gateway starting, `corral
    doctor`) leaves what a dead owner left while the owner's watchdog runs: the watchdog
    removes it and audits it in the owner's own audit, where the other reaper would have
    audited it in its own (the owner's audit then missing it). The watchdog is held
    with SIGSTOP to keep that window open while the other reaper runs; let go, it sweeps.
    Fails without the watchdog's labels on the container (the reaper takes it: checked)."""
    audit, other = tmp_path / "audit.jsonl", tmp_path / "other-home-audit.jsonl"
    with HeldCreates(tmp_path / "engine.sock", let_through=1) as engine:
        owner = owner_of(engine.url, audit, pause=True, host="this")
        instance = owner.stdout.readline().decode().strip()
        watchdog = watchdog_pid(instance)
        assert watchdog is not None
        mine = {"label": [f"{LABEL_INSTANCE}={instance}"]}
        os.kill(watchdog, signal.SIGSTOP)
        try:
            owner.send_signal(signal.SIGKILL)
            owner.wait()
            (left,) = docker_client.containers.list(all=True, filters=mine)
            backend = DockerBackend(Owner.current(), engine.url)
            try:
                removed = await reap_orphans(backend, AuditLog(other))
            finally:
                await backend.close()
            assert left.name not in removed
            assert docker_client.containers.list(all=True, filters=mine)
        finally:
            os.kill(watchdog, signal.SIGCONT)
        await wait_until(lambda: reaped(audit) == ["first"])
        assert not docker_client.containers.list(all=True, filters=mine)
        assert reaped(other) == []
        await wait_until(lambda: not watchdog_of(instance))
