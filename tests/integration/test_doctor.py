"""`corral doctor` on the real engine (issue 14): how many session networks still fit in
the engine's address pools, whether gVisor's runsc is registered, and where the kiosks'
channels go."""

from __future__ import annotations

import ipaddress
import re
import subprocess

import docker

from orchestrator.home import CorralHome
from tests.integration.conftest import corral_bin, env_with_home, write_config


def _doctor(home: CorralHome) -> subprocess.CompletedProcess[str]:
    env = {**env_with_home(home), "COLUMNS": "400"}  # one table row per line
    return subprocess.run(
        [corral_bin(), "doctor"], env=env, capture_output=True, text=True, timeout=120
    )


def _row(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if name in line)


def test_doctor_says_how_many_session_networks_fit_and_whether_runsc_is_registered(
    corral_home: CorralHome, docker_client: docker.DockerClient
) -> None:
    info = docker_client.info()
    done = _doctor(corral_home)
    assert done.returncode == 0, done.stdout + done.stderr
    # The engine's pools, as `docker info` lists them (this engine: scripts/dockerd.json).
    pools = info.get("DefaultAddressPools") or []
    assert pools, "this engine was expected to list its address pools"
    total = sum(2 ** (p["Size"] - ipaddress.ip_network(p["Base"]).prefixlen) for p in pools)
    row = _row(done.stdout, "session networks")
    found = re.search(r"(\d+) more session networks fit \((\d+) of (\d+) in use", row)
    assert found, row
    free, used, listed = (int(g) for g in found.groups())
    assert listed == total and free + used == total and used >= 1  # the default bridge
    assert "daemon.json" in row
    runsc = _row(done.stdout, "runsc (gVisor)")
    assert f"registered: {info['Runtimes']['runsc']['path']}" in runsc
    assert "scripts use runc" in runsc
    assert "a unix socket of their own" in _row(done.stdout, "kiosk channels")


def test_doctor_says_the_channels_go_through_the_attach_when_told_so(
    corral_home: CorralHome,
) -> None:
    write_config(corral_home, '[backend]\nkind = "docker"\nchannel_socket = false\n')
    done = _doctor(corral_home)
    assert done.returncode == 0, done.stdout + done.stderr
    row = _row(done.stdout, "kiosk channels")
    assert "the engine's attach ([backend] channel_socket = false)" in row


def test_doctor_reports_the_runsc_setting(corral_home: CorralHome) -> None:
    write_config(corral_home, '[container.sandbox]\nruntime = "runsc"\n')
    done = _doctor(corral_home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scripts use runsc" in _row(done.stdout, "runsc (gVisor)")
