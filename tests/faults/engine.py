"""A Docker engine of the test's own: a second `dockerd` on a private socket, data root and
exec root, with no iptables rules of its own, so a test can stop and start it (or fill its
address pools) without touching the engine every other test runs on. Images come from the
main engine (`docker save | docker load`): none is pulled.

Its default bridge is the host's `docker0`, adopted as it is, its address given as
`--bip` (without it, the engine adds an address of its own pool to the bridge), and never
used: corral's containers run on no network or on networks of their own. A dockerd given
any other default bridge (`--bridge none`, or a bridge of its own) deletes the host's
`docker0` at its start, which is the main engine's default network (seen here: every
`docker run` on the default network failed after it); `private_engine` checks that
`docker0` keeps its addresses. Not a network namespace of its own: the gateway probes its
egress proxies over TCP from the host's.

Its address pool is a block of 10.214.0.0/16 no route of the host overlaps, picked at its
start: a dockerd that was killed (a run cut short) leaves its networks' bridges on the
host with their addresses, and an engine allocates no subnet a host route overlaps, so a
fixed block would hold fewer networks than a test counts on (seen here: three stale
bridges left one of four)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from math import ceil, log2
from pathlib import Path

import docker

PRIVATE_RANGE = ipaddress.ip_network("10.214.0.0/16")  # beside the main engine's 10.213/16
START_S = 60.0  # the outer bound of a start: reached only when dockerd never answers
STOP_S = 60.0


@dataclass
class PrivateEngine:
    root: Path
    argv: list[str]
    pool: str = ""  # the address block its networks come from
    proc: subprocess.Popen[bytes] | None = field(default=None)

    @property
    def url(self) -> str:
        return f"unix://{self.root / 'docker.sock'}"

    def start(self) -> None:
        log = (self.root / "dockerd.log").open("ab")
        with log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + START_S
        while not self.answers():  # the engine itself is the event waited on
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"private dockerd did not start: {self.log_tail()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def answers(self) -> bool:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:  # look first: no SDK client (and its retries) for an engine not yet listening
            probe.connect(str(self.root / "docker.sock"))
        except OSError:
            return False
        finally:
            probe.close()
        try:
            client = docker.DockerClient(base_url=self.url, version="1.41", timeout=5)
        except docker.errors.DockerException:
            return False
        try:
            return bool(client.ping())
        except Exception:
            return False
        finally:
            client.close()

    def empty(self) -> list[str]:
        """Remove every container and network the engine has (it is about to go); the
        host bridges of its networks, for the caller to delete should one outlive it."""
        if not self.answers():
            return []
        client = docker.DockerClient(base_url=self.url, version="1.41")
        bridges = []
        try:
            for container in client.containers.list(ignore_removed=True, all=True):
                container.remove(force=True)
            for network in client.networks.list():
                if network.name in ("bridge", "host", "none"):
                    continue
                options = network.attrs.get("Options") or {}
                name = options.get("com.docker.network.bridge.name") or f"br-{network.id[:12]}"
                bridges.append(str(name))
                with contextlib.suppress(docker.errors.APIError):
                    network.remove()
        finally:
            client.close()
        return bridges

    def load(self, images: Sequence[str]) -> None:
        """Copy `images` from the main engine."""
        save = subprocess.Popen(["docker", "save", *images], stdout=subprocess.PIPE)
        assert save.stdout is not None
        loaded = subprocess.run(
            ["docker", "-H", self.url, "load", "-q"], stdin=save.stdout, capture_output=True
        )
        save.stdout.close()
        assert save.wait() == 0 and loaded.returncode == 0, loaded.stderr

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.root / "dockerd.log").read_text(errors="replace")[-2000:]
        return ""


def docker0_addresses() -> list[str]:
    """The IPv4 addresses (with prefix) of the host's docker0; [] without one."""
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", "docker0"], capture_output=True, text=True
    )
    words = shown.stdout.split()
    return [words[i + 1] for i, word in enumerate(words) if word == "inet"]


def host_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks the host routes to or holds an address in (what dockerd checks a
    new network's subnet against)."""
    routes = json.loads(_ip("route", "show") or "[]")
    links = json.loads(_ip("addr", "show") or "[]")
    found = [r["dst"] for r in routes if r.get("dst", "default") != "default"]
    for link in links:
        found += [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])]
    return [ipaddress.IPv4Network(net, strict=False) for net in found]


def _ip(*args: str) -> str:
    shown = subprocess.run(["ip", "-4", "-j", *args], capture_output=True, text=True, check=True)
    return shown.stdout


def free_block(networks: int, taken: list[ipaddress.IPv4Network]) -> str:
    """The first block of PRIVATE_RANGE holding `networks` /24s that overlaps none of
    `taken`."""
    prefix = 24 - ceil(log2(max(networks, 1)))
    for block in PRIVATE_RANGE.subnets(new_prefix=prefix):
        if not any(block.overlaps(net) for net in taken):
            return str(block)
    raise AssertionError(f"no block of {networks} networks in {PRIVATE_RANGE} is free: {taken}")


@contextlib.contextmanager
def private_engine(networks: int = 16) -> Iterator[PrivateEngine]:
    """A started private dockerd whose session networks come from a block of `networks`
    /24s (a power of two) free on this host; stopped and its files removed after the
    block."""
    if shutil.which("dockerd") is None:
        raise AssertionError("dockerd is not installed (make setup installs it)")
    root = Path(tempfile.mkdtemp(prefix="cdk-", dir="/tmp"))  # short: socket paths <108
    config = root / "daemon.json"
    address_pool = free_block(networks, host_networks())
    pools = f'[{{"base": "{address_pool}", "size": 24}}]'
    config.write_text(f'{{"default-address-pools": {pools}}}')
    before = docker0_addresses()
    if not before:
        raise AssertionError("the main engine's docker0 has no IPv4 address (is dockerd up?)")
    argv = [
        "dockerd",
        "--config-file", str(config),
        "-H", f"unix://{root / 'docker.sock'}",
        "--data-root", str(root / "data"),
        "--exec-root", str(root / "x"),
        "--pidfile", str(root / "dockerd.pid"),
        "--iptables=false",
        "--bip", before[0],
    ]  # fmt: skip
    engine = PrivateEngine(root, argv, pool=address_pool)
    try:
        engine.start()
        yield engine
    finally:
        bridges = engine.empty()
        engine.stop()
        for name in bridges:  # a stopped engine keeps its networks' bridges on the host
            subprocess.run(["ip", "link", "delete", name], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
    assert docker0_addresses() == before, "the main engine's docker0 was changed"
