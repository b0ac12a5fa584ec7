"""In-memory stand-ins for the container engine and the kiosk agent, for unit tests.

They sit below real tests of the same paths: `DockerBackend` and the real kiosk agent
are exercised by tests/integration (test_kiosk_agent.py, test_script_lifecycle.py) and
tests/e2e (test_computer_use.py). Here they let the session rules (one session per
agent, budget, idle timeout, lifetime, why a session ended) run without Docker.

`FakeKiosk` speaks the kiosk agent's wire protocol (JSON lines, docs/kiosk-internals.md
section 2) over `AttachedContainer`, so the real `KioskChannel` runs on top of it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import struct
import uuid
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
from PIL import Image

from sandboxes.errors import EngineError
from sandboxes.ports import ContainerSpec, ExitInfo, ManagedContainer
from sandboxes.scoped import Scoped


def png_of(width: int, height: int, colour: tuple[int, int, int] = (255, 255, 255)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, format="PNG")
    return out.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A PNG of one pixel whose header claims `width` x `height` (its CRC right): what a
    compromised kiosk or device could send to have its reader allocate for that size."""
    png = png_of(1, 1, (0, 0, 0))
    head = b"IHDR" + struct.pack(">II", width, height) + png[24:29]
    return png[:12] + head + struct.pack(">I", zlib.crc32(head)) + png[33:]


@dataclass
class FakeKiosk:
    """The kiosk agent's side of the channel: answers each JSON request line.

    `fail_ops`: ops answered with ok=false. `flood_on`: ops answered with an endless
    stream of bytes and no line end. `close_on`: ops after which the stream ends
    (as when the agent dies). `probe`: what the screenshot probe reports."""

    id: str
    spec: ContainerSpec
    backend: InMemoryBackend
    fail_ops: set[str] = field(default_factory=set)
    close_on: set[str] = field(default_factory=set)
    flood_on: set[str] = field(default_factory=set)
    shot_fields: dict[str, Any] = field(default_factory=dict)  # override screenshot fields
    probe: dict[str, Any] = field(
        default_factory=lambda: {
            "windows": 1,
            "focused_ok": True,
            "password_rects": [],
            "url": "about:blank",
            "title": "",
        }
    )
    # What the `target` op names at a point (default: an element without a name).
    targets: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Ops whose answer waits for `release()` (an input in flight); `arrived` is set when
    # one came in.
    held_ops: set[str] = field(default_factory=set)
    held: list[bytes] = field(default_factory=list)
    arrived: anyio.Event = field(default_factory=anyio.Event)
    size: tuple[int, int] = (1280, 800)
    _answers: list[bytes] = field(default_factory=list)
    _ready: anyio.Event = field(default_factory=anyio.Event)
    _ended: bool = False
    _flooding: bool = False

    async def send(self, data: bytes) -> None:
        if self._ended:
            raise OSError("the kiosk's stdin is closed")
        for line in data.splitlines():
            request = json.loads(line)
            if request["op"] == "ping":  # the heartbeat: answered at once, held op or not
                pong = {"id": request["id"], "ok": True, "pong": True}
                self._answers.append(json.dumps(pong).encode() + b"\n")
                continue
            self.requests.append(request)
            if request["op"] in self.flood_on:
                self._flooding = True
                continue
            answer = json.dumps(self._answer(request)).encode() + b"\n"
            if request["op"] in self.held_ops:
                self.held.append(answer)
                self.arrived.set()
                continue
            self._answers.append(answer)
            if request["op"] in self.close_on:
                self._ended = True
        self._ready.set()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        base = {"id": request["id"]}
        if op in self.fail_ops:
            return {**base, "ok": False, "error": f"{op} failed on purpose"}
        if op == "start":
            if request.get("stage") != "browser":  # "display", or both at once
                self.size = (int(request["width"]), int(request["height"]))
            if request.get("stage") == "display":
                return {**base, "ok": True, "ms": 1.0}
            return {**base, "ok": True, "chromium_sandbox": True, "ms": 1.0}
        if op == "screenshot":
            return self._screenshot(request, base)
        if op == "navigate":
            return {**base, "ok": True, "url": request["url"]}
        if op == "target":
            found = self.targets.get((int(request["x"]), int(request["y"])))
            return {**base, "ok": True, **(found or {"name": "", "role": "generic"})}
        return {**base, "ok": True}

    def _screenshot(self, request: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
        """As the kiosk agent answers: `digest` (of the pixels: here of what is sent) when
        asked, and `same` alone when they are still those of `unless`."""
        answer = {
            **base,
            "ok": True,
            "png": base64.b64encode(png_of(*self.size)).decode(),
            "width": self.size[0],
            "height": self.size[1],
            "probe": self.probe,
            **self.shot_fields,
        }
        if request.get("digest") is not True:
            return answer
        digest = hashlib.sha256(str(answer.get("png")).encode()).hexdigest()
        if request.get("unless") == digest:
            return {**base, "ok": True, "same": True, "digest": digest}
        return {**answer, "digest": digest}

    def release(self) -> None:
        """Answer the held ops (the input in flight ends)."""
        self._answers.extend(self.held)
        self.held.clear()
        self.arrived = anyio.Event()
        self._ready.set()

    async def receive(self) -> bytes | None:
        if self._flooding and not self._ended:
            await anyio.lowlevel.checkpoint()
            return b"x" * (4 * 1024 * 1024)
        while not self._answers:
            if self._ended:
                return None
            self._ready = anyio.Event()
            await self._ready.wait()
        return self._answers.pop(0)

    async def wait(self) -> ExitInfo:
        """How the fake ended: as a killed kiosk (no engine to ask)."""
        return ExitInfo(exit_code=137, oom_killed=False)

    async def close(self) -> None:
        self._ended = True
        self._ready.set()
        await self.backend.remove(self.id)


class _NoRun(Scoped):
    """The in-memory backend runs no scripts: entering says so."""

    async def open(self) -> None:
        raise NotImplementedError("the in-memory backend runs no scripts (see tests/integration)")

    async def end(self, ok: bool) -> None:
        return None


class _FailingScript(Scoped):
    """A script container that fails with `error` (a SandboxUnavailable, say, as a transport
    error may be mapped) before it starts (`when="before"`: entering raises) or after
    (`when="after"`: it is up, then its output and its exit fail)."""

    def __init__(self, backend: InMemoryBackend, error: Exception, when: str) -> None:
        self.backend, self.error, self.when = backend, error, when

    async def open(self) -> None:
        if self.when == "before":
            raise self.error
        self.backend.scripts_started += 1

    async def end(self, ok: bool) -> None:
        return None

    async def output(self) -> AsyncIterator[bytes]:
        await anyio.lowlevel.checkpoint()
        raise self.error
        yield b""  # pragma: no cover (makes this an async generator)

    async def wait(self) -> Any:
        raise self.error

    async def kill(self) -> None:
        return None


@dataclass
class InMemoryBackend:
    """A `ContainerBackend` that keeps containers in a dict. `kiosk_options` are passed to
    every FakeKiosk it opens. With `script_failure` = (when, error), a script's start
    fails with `error` "before" or "after" the container started (`scripts_started`
    counts the ones that did); without it, a script start says it runs no scripts."""

    kiosk_options: dict[str, Any] = field(default_factory=dict)
    live: dict[str, FakeKiosk] = field(default_factory=dict)
    opened: list[FakeKiosk] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    script_failure: tuple[str, Exception] | None = None
    scripts_started: int = 0

    def labels(self, *, kind: str, agent: str, session: str) -> dict[str, str]:
        return {
            "corral.managed": "true",
            "corral.kind": kind,
            "corral.agent": agent,
            "corral.session": session,
        }

    async def check(self, image: str) -> None:
        return None

    def start(self, spec: ContainerSpec) -> _NoRun | _FailingScript:
        if self.script_failure is None:
            return _NoRun()
        when, error = self.script_failure
        return _FailingScript(self, error, when)

    async def open_attached(self, spec: ContainerSpec) -> FakeKiosk:
        kiosk = FakeKiosk(uuid.uuid4().hex, spec, self, **self.kiosk_options)
        self.live[kiosk.id] = kiosk
        self.opened.append(kiosk)
        return kiosk

    async def open_exec(self, container_id: str, argv: Sequence[str], *, user: str) -> Any:
        """No process runs in a fake kiosk: exec streams (the VNC relay) are tested on the
        real engine (tests/integration/test_kiosk_vnc.py)."""
        raise EngineError("the in-memory backend cannot run a process in a container")

    async def list_managed(self, label_filters: Mapping[str, str]) -> list[ManagedContainer]:
        return [
            ManagedContainer(k.id, k.id[:12], "running", dict(k.spec.labels))
            for k in self.live.values()
            if all(k.spec.labels.get(key) == value for key, value in label_filters.items())
        ]

    async def remove(self, container_id: str) -> None:
        if self.live.pop(container_id, None) is not None:
            self.removed.append(container_id)

    supports_pools = False  # the pools are tested on the real engine

    async def is_running(self, container_id: str) -> bool:
        return container_id in self.live

    async def set_cpu_shares(self, container_id: str, shares: int) -> None:
        raise EngineError("the in-memory backend has no pool members to reweigh")

    async def image_id(self, image: str) -> str:
        return f"sha256:{image}"

    async def open_waiting(self, spec: ContainerSpec) -> Any:
        raise EngineError("the in-memory backend has no warm containers")

    async def prepare_network(self, agent: str) -> Any:
        raise EngineError("the in-memory backend has no networks")

    def egress_factory(self, proxy_image: str) -> Any:
        return fake_egress

    async def reap_networks(self) -> list[str]:
        return []

    async def doctor_rows(
        self, image: str, runtime: str, audit: Any = None
    ) -> list[tuple[str, bool, str]]:
        return [("in-memory backend", True, image)]

    async def close(self) -> None:
        return None


@dataclass
class FakeEgress:
    """Egress as a session sees it, with every allowed host pinned to a test address."""

    pins: dict[str, list[str]]
    left_out: dict[str, str] = field(default_factory=dict)
    network_name: str | None = "corral-s-fake"
    proxy_url: str | None = "http://proxy:3128"
    dns_servers: list[str] = field(default_factory=lambda: ["172.30.0.1"])
    restricted: list[tuple[str, ...]] = field(default_factory=list)

    async def restrict(self, hosts: Sequence[str]) -> None:
        self.restricted.append(tuple(hosts))
        self.pins = {h: a for h, a in self.pins.items() if h in hosts}

    async def check(self) -> str | None:
        return self.gone

    gone: str | None = None  # why the fake proxy is gone (a test sets it)


@asynccontextmanager
async def fake_egress(
    *,
    session_id: str,
    agent: str,
    allowed: tuple[str, ...],
    overrides: dict[str, str],
    network: Any = None,
) -> AsyncIterator[FakeEgress]:
    """Every allowed host is pinned, except those starting with `dead.`, left out."""
    pinned = [host for host in allowed if not host.startswith("dead.")]
    left_out = {host: "the name does not resolve" for host in allowed if host not in pinned}
    if not pinned:
        yield FakeEgress(
            pins={}, left_out=left_out, network_name=None, proxy_url=None, dns_servers=[]
        )
        return
    yield FakeEgress(pins={host: ["192.0.2.10"] for host in pinned}, left_out=left_out)


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
