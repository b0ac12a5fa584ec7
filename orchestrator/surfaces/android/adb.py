"""corral's own adb server and the calls mobile_use makes through it (SPEC S4.1, S4.4).

The server is Google's adb binary that the `adbutils` wheel bundles, run as a child of
the gateway (`adb -L localfilesystem:PATH server nodaemon`), never on 5037 (the user's
own adb server) and never on TCP: it listens on a unix socket in a directory only the
gateway's user can enter (0700, `CORRAL_HOME/adb`), since an adb server has no
authentication and whoever reaches it drives the phone past every check. It is killed
when the gateway ends. The gateway talks to it with `adbutils` (the ADB smart-socket
protocol), whose TCP connection is replaced here by one to that socket. `[rigs.android]
devices` entries of the form HOST:PORT are attached with `adb connect`. ADB errors are
translated into `DeviceError` in exactly one place, `map_adb_errors`.

Every call to a device is an argv: corral quotes each word (`shlex.join`) into the
`shell:` service, so nothing the model sends is read by the device's shell as syntax.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import adbutils
import anyio
from adbutils._adb import AdbConnection
from adbutils.errors import AdbConnectionError, AdbError, AdbTimeout

from orchestrator.config import AndroidRigConfig
from orchestrator.errors import DeviceError

logger = logging.getLogger("corral.adb")
T = TypeVar("T")
START_DEADLINE = 20.0
_HOST_PORT_RE = re.compile(r"^[^:]+:[0-9]{1,5}$")


@contextlib.contextmanager
def map_adb_errors(serial: str) -> Iterator[None]:
    """ADB failures as `DeviceError`; `lost` when the device is gone or not usable."""
    try:
        yield
    except (AdbTimeout, TimeoutError) as exc:
        raise DeviceError(f"device {serial} did not answer in time ({exc})", lost=True) from exc
    except AdbConnectionError as exc:
        raise DeviceError(
            f"device {serial}: corral's adb server does not answer ({exc}); the next call "
            "starts it again",
            lost=True,
        ) from exc
    except AdbError as exc:
        text = str(exc)
        low = text.lower()
        if "unauthorized" in low:
            raise DeviceError(
                f"device {serial} is unauthorized: accept the USB debugging (RSA key) prompt "
                "on the device for corral's adb server, then try again",
                lost=True,
            ) from exc
        if "offline" in low or "not found" in low or "closed" in low or "no devices" in low:
            raise DeviceError(
                f"device {serial} is offline or gone ({text[:200]})", lost=True
            ) from exc
        raise DeviceError(f"device {serial}: adb failed ({text[:300]})") from exc
    except (ConnectionError, OSError, EOFError) as exc:
        raise DeviceError(
            f"device {serial}: the connection to adb broke ({exc})", lost=True
        ) from exc


def _die_with_parent(parent: int, prctl: Any) -> None:  # pragma: no cover (in the child)
    """PR_SET_PDEATHSIG: SIGTERM when the gateway's thread that started it ends."""
    prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent:  # the gateway died before the call above
        os._exit(1)


def _pdeathsig() -> Callable[[], None] | None:
    """The child's parent-death hook on Linux (libc resolved here, before the fork)."""
    if sys.platform != "linux":
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return functools.partial(_die_with_parent, os.getpid(), prctl)


SOCKET_NAME = "adb.sock"
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes on Linux, 104 on macOS


def private_dir(wanted: Path | None) -> tuple[Path, bool]:
    """A directory only this user can enter for the server's socket, and whether corral
    made it for this server alone (then it is removed at close). `wanted` (under
    CORRAL_HOME) when its socket path fits a sockaddr_un, else a fresh `mkdtemp`."""
    if wanted is not None and len(os.fsencode(wanted / SOCKET_NAME)) <= _SUN_PATH_MAX:
        wanted.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = wanted.lstat()
        if info.st_uid != os.getuid() or not wanted.is_dir() or wanted.is_symlink():
            raise DeviceError(f"{wanted} is not a directory of this user; remove it")
        os.chmod(wanted, 0o700)
        return wanted, False
    return Path(tempfile.mkdtemp(prefix="corral-adb-")), True  # mkdtemp: mode 0700


class _NoAutoStart(AdbConnection):  # type: ignore[misc]
    """A connection to corral's adb server over its unix socket. adbutils starts `adb
    start-server` on port 5037 when a connect fails; corral's client never does: a server
    that is not there is an error."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._sock: socket.socket | None = None
        super().__init__("localhost", 0)  # adbutils' own fields; the socket is below

    def _safe_connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(3)
        try:
            sock.connect(os.fspath(self._path))
        except OSError as exc:
            sock.close()
            raise AdbConnectionError(f"connect to corral's adb server failed: {exc}") from exc
        sock.settimeout(None)
        self._sock = sock
        return sock

    def close(self) -> None:
        """Shut down and close at once. adbutils' own close sleeps 10 ms after its shutdown
        ("make sure the shutdown is processed"), on every connection, two per shell call:
        20 of a tap's 22 ms against the simulator (issue 23 item 5). A shutdown is done
        when it returns; this socket is corral's alone (never shared with a child)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        sock.close()
        self._AdbConnection__conn = None  # adbutils' field (name-mangled): it is closed


class PrivateAdbClient(adbutils.AdbClient):  # type: ignore[misc]
    """An adbutils client bound to corral's adb server (its unix socket) only."""

    def __init__(self, path: Path, seconds: float) -> None:
        super().__init__(host="localhost", port=0, socket_timeout=seconds)
        self.path = path
        self.seconds = seconds
        self._version: int | None = None

    def server_version(self) -> int:
        """adbutils asks it before every device connection (one more connection each
        time); corral's own server does not change its version while it runs."""
        if self._version is None:
            self._version = int(super().server_version())
        return self._version

    def make_connection(self, timeout: float | None = None) -> AdbConnection:
        try:
            conn = _NoAutoStart(self.path)
        except TimeoutError as exc:
            raise AdbTimeout("connect to corral's adb server timed out") from exc
        conn.conn.settimeout(timeout or self.seconds)
        return conn


@dataclass(frozen=True, slots=True)
class DeviceState:
    serial: str
    state: str  # device, offline, unauthorized, missing, ...


class AdbServer:
    """The adb server child process and an adbutils client bound to it."""

    def __init__(
        self, cfg: AndroidRigConfig, *, adb_path: str | None = None, home_dir: Path | None = None
    ) -> None:
        self.cfg = cfg
        self.adb_path = adb_path or adbutils.adb_path()
        self.home_dir = home_dir  # where the socket's private directory goes
        self.socket_path: Path | None = None
        self._made_dir = False
        self.process: subprocess.Popen[bytes] | None = None
        self.client: PrivateAdbClient | None = None
        self._lock = anyio.Lock()

    async def ensure(self) -> PrivateAdbClient:
        async with self._lock:
            if self.client is not None and self.process is not None:
                if self.process.poll() is None:
                    return self.client
                logger.warning("adb server exited (%s); starting it again", self.process.returncode)
            await self._start()
            assert self.client is not None
            await self.connect_remote()
            return self.client

    def _spawn(self, path: Path) -> subprocess.Popen[bytes]:
        # No mDNS (it would multicast on every interface) and no emulator port scan. USB
        # through adb's native Linux backend: with libusb (the default) a host where
        # libusb cannot start holds every first request for 3 s.
        env = {**os.environ, "ADB_MDNS": "0", "ADB_MDNS_AUTO_CONNECT": "0", "ADB_EMU": "0"}
        if sys.platform == "linux":
            env["ADB_LIBUSB"] = "0"
        for name in ("ANDROID_ADB_SERVER_PORT", "ANDROID_ADB_SERVER_ADDRESS", "ADB_SERVER_SOCKET"):
            env.pop(name, None)
        # Started from the event loop's own thread, which lives as long as the gateway:
        # the parent-death signal (Linux) is tied to the thread that forks, so a gateway
        # killed with SIGKILL takes its adb server with it.
        return subprocess.Popen(
            [self.adb_path, "-L", f"localfilesystem:{path}", "server", "nodaemon"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_pdeathsig(),
        )

    async def _start(self) -> None:
        if self.cfg.adb_port is not None:
            logger.warning("[rigs.android] adb_port is ignored: the adb server uses a unix socket")
        if self.socket_path is None:
            folder, self._made_dir = private_dir(self.home_dir)
            self.socket_path = folder / SOCKET_NAME
        path = self.socket_path
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a server that was killed
        self.process = self._spawn(path)
        with anyio.fail_after(START_DEADLINE):
            while True:
                if self.process.poll() is not None:
                    raise DeviceError(
                        f"corral's adb server exited at start (code {self.process.returncode})"
                    )
                try:
                    stream = await anyio.connect_unix(path)
                    await stream.aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)  # polling the server's socket until it listens
        self.client = PrivateAdbClient(path, self.cfg.timeout_seconds)
        logger.info("adb server %s listening on %s", self.adb_path, path)

    async def connect_remote(self) -> None:
        """`adb connect` every HOST:PORT device (answers are checked by `states`)."""
        assert self.client is not None
        for entry in self.cfg.devices:
            if _HOST_PORT_RE.fullmatch(entry):
                client, seconds = self.client, self.cfg.timeout_seconds
                with contextlib.suppress(AdbError, OSError):
                    answer = await anyio.to_thread.run_sync(
                        functools.partial(client.connect, entry, timeout=seconds)
                    )
                    logger.info("adb connect %s: %s", entry, answer)

    async def states(self) -> list[DeviceState]:
        """Each configured device's state as the adb server sees it."""
        client = await self.ensure()
        seen = {info.serial: info.state for info in await anyio.to_thread.run_sync(client.list)}
        missing = [e for e in self.cfg.devices if e not in seen]
        if missing and any(_HOST_PORT_RE.fullmatch(e) for e in missing):
            await self.connect_remote()
            seen = {info.serial: info.state for info in await anyio.to_thread.run_sync(client.list)}
        return [DeviceState(e, seen.get(e, "missing")) for e in self.cfg.devices]

    async def close(self) -> None:
        process, self.process, self.client = self.process, None, None
        if process is not None:
            with anyio.CancelScope(shield=True):
                if process.poll() is None:
                    process.terminate()
                    try:
                        await anyio.to_thread.run_sync(functools.partial(process.wait, timeout=5))
                    except subprocess.TimeoutExpired:
                        process.kill()
                        await anyio.to_thread.run_sync(process.wait)
        path, self.socket_path = self.socket_path, None
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            if self._made_dir:
                with contextlib.suppress(OSError):
                    path.parent.rmdir()


class AndroidDevice:
    """One leased device: argv calls over `shell:`, bytes over `exec:`, files over `sync:`."""

    def __init__(self, client: adbutils.AdbClient, serial: str, timeout: float) -> None:
        self.serial = serial
        self.timeout = timeout
        self.client = client
        self.device = client.device(serial)

    async def _call(self, fn: Callable[[], T]) -> T:
        with map_adb_errors(self.serial):
            with anyio.fail_after(self.timeout + 5):
                return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
        raise AssertionError("unreachable")  # pragma: no cover

    async def state(self) -> str:
        """The device's state in the server's device list ("missing" when not in it).
        (adbutils' get_state leaves its socket open when the device is gone.)"""
        infos = await self._call(self.client.list)
        return next((str(i.state) for i in infos if i.serial == self.serial), "missing")

    async def shell(self, argv: list[str]) -> str:
        command = shlex.join(argv)
        out: Any = await self._call(
            lambda: self.device.shell(command, timeout=self.timeout, encoding="utf-8")
        )
        return str(out)

    async def exec_out(self, argv: list[str]) -> bytes:
        """Raw bytes of `exec:` (no terminal translation): screencap's PNG."""
        command = shlex.join(argv)

        def run() -> bytes:
            with self.device.open_transport(timeout=self.timeout) as conn:
                conn.send_command("exec:" + command)
                conn.check_okay()
                data = conn.read_until_close(encoding=None)
                assert isinstance(data, bytes)
                return data

        return await self._call(run)

    async def push(self, data: bytes, remote: str) -> int:
        return await self._call(lambda: self.device.sync.push(data, remote, mode=0o644))
