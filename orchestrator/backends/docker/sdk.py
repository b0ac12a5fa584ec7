"""The Docker SDK's edge: where its errors become ours, and where its blocking calls run.

Docker and requests exceptions are translated into `orchestrator.errors` here and
nowhere else (`map_docker_errors`, most specific first); a module of this package that
must tell one failure from another catches our types (`EngineNotFound`,
`EngineConflict`), never `docker.errors`. Every blocking SDK call of the backend runs in
a worker thread through `blocking`, so the event loop never waits on the engine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import anyio
import docker
import docker.errors
import docker.transport.unixconn
import requests.exceptions

from orchestrator.errors import (
    CorralError,
    EngineConflict,
    EngineError,
    EngineNotFound,
    NoSessionNetwork,
    SandboxUnavailable,
    UnavailableCode,
)

T = TypeVar("T")

API_VERSION = "1.41"  # Docker 20.10, the oldest engine corral supports
DEFAULT_SOCKET = "unix:///var/run/docker.sock"

FIX_START_ENGINE = "start the Docker engine (`make run` does it, or `sudo dockerd &`)"
FIX_INSTALL_ENGINE = "install Docker (`make run` installs Debian's docker.io) and start it"


def engine_url(docker_host: str | None, environ: Mapping[str, str]) -> str:
    """The engine: `docker_host` (config.toml), else DOCKER_HOST as the CLI read it, else
    the local socket. Nothing here reads the process's environment."""
    return docker_host or environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def _connect_or_close(self: docker.transport.unixconn.UnixHTTPConnection) -> None:
    """The SDK's unix connect, closing its socket when the connect fails. The SDK (7.2)
    leaves it open for the garbage collector: each call made while the engine is down
    held one descriptor until a collection (a ResourceWarning then, in whichever test
    ran). Upstream's fix, docker/docker-py#3356, is not merged; drop this once it is."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(self.timeout)
        sock.connect(self.unix_socket)
    except BaseException:
        sock.close()
        raise
    self.sock = sock


docker.transport.unixconn.UnixHTTPConnection.connect = _connect_or_close  # type: ignore[method-assign]


def connect(url: str) -> docker.DockerClient:
    """A client of the engine at `url` (no engine call), its errors mapped."""
    with map_docker_errors(url):
        return docker.DockerClient(base_url=url, version=API_VERSION)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, its causes/contexts, and exceptions wrapped as a first argument."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for nxt in (current.__cause__, current.__context__):
            if nxt is not None:
                pending.append(nxt)
        if current.args and isinstance(current.args[0], BaseException):
            pending.append(current.args[0])


def classify_connection_error(exc: BaseException, url: str) -> SandboxUnavailable:
    """Turn a failure to reach the engine into one of the closed codes (pure but for `which`)."""
    text = " ".join(str(e) for e in _chain(exc))
    if "Permission denied" in text or any(isinstance(e, PermissionError) for e in _chain(exc)):
        return SandboxUnavailable(
            UnavailableCode.PERMISSION_DENIED,
            f"no permission to use the Docker engine at {url}",
            "run corral as a user in the 'docker' group, or as root",
        )
    if (
        url.startswith("unix://")
        and shutil.which("dockerd") is None
        and not os.path.exists(url.removeprefix("unix://"))
    ):
        return SandboxUnavailable(
            UnavailableCode.DOCKER_NOT_INSTALLED,
            "no Docker engine is installed on this machine",
            FIX_INSTALL_ENGINE,
        )
    return SandboxUnavailable(
        UnavailableCode.DAEMON_UNREACHABLE,
        f"the Docker engine at {url} does not answer",
        FIX_START_ENGINE,
    )


def probe_unix_socket(url: str) -> None:
    """Connect to a unix engine socket ourselves and close it: a dead engine is named
    (`classify_connection_error`) before any SDK call; a TCP engine is left to the SDK."""
    if not url.startswith("unix://"):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(5)
        probe.connect(url.removeprefix("unix://"))
    except OSError as exc:
        raise classify_connection_error(exc, url) from exc
    finally:
        probe.close()


@contextlib.contextmanager
def map_docker_errors(url: str, image: str | None = None) -> Iterator[None]:
    """Translate SDK/requests errors, most specific first."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise SandboxUnavailable(
            UnavailableCode.IMAGE_MISSING,
            f"the image {image or '?'} is not present on the engine at {url}",
            "corral images build",
        ) from exc
    except (requests.exceptions.ConnectionError, FileNotFoundError, ConnectionError) as exc:
        raise classify_connection_error(exc, url) from exc
    except docker.errors.APIError as exc:
        raise api_error(exc, url) from exc
    except docker.errors.DockerException as exc:
        raise classify_connection_error(exc, url) from exc


def api_error(exc: docker.errors.APIError, url: str) -> CorralError:
    """What an engine's refusal means, most specific first (pure)."""
    explanation = str(exc.explanation or exc)
    if "non-overlapping" in explanation and "address pool" in explanation:
        return NoSessionNetwork(no_network_message(url, explanation))  # the engine says 404
    if isinstance(exc, docker.errors.NotFound):
        return EngineNotFound(f"Docker engine error: {explanation}")
    if "unknown or invalid runtime name" in explanation:
        return SandboxUnavailable(
            UnavailableCode.ENGINE_ERROR,
            f"the engine at {url} has no such container runtime ({explanation})",
            "register it with the engine (scripts/dockerd.json has runsc; see "
            'docs/security.md) or set [container.sandbox] runtime = "runc"',
        )
    if exc.status_code in (403, 409):  # e.g. a network in use, a removal under way
        return EngineConflict(f"Docker engine error: {explanation}")
    return EngineError(f"Docker engine error: {explanation}")


def no_network_message(url: str, explanation: str) -> str:
    return (
        f"No session network free: every network of the address pools of the engine at "
        f"{url} is in use ({explanation}). Nothing was started. Fix: end a session or rig "
        "you no longer need (`corral sessions list`), remove networks left behind "
        "(`corral reap`), or give the engine larger `default-address-pools` "
        "(scripts/dockerd.json); `corral doctor` counts the networks left."
    )


def image_or_none(client: docker.DockerClient, name: str) -> Any:
    """The image `name`, or None when the engine has none of that name (blocking). Any
    other failure propagates raw, for the caller's `map_docker_errors` (with the URL)."""
    try:
        return client.images.get(name)
    except docker.errors.ImageNotFound:
        return None


def remove_unnamed_image(client: docker.DockerClient, image_id: str) -> bool:
    """Remove an image left with no name, never forced (blocking); False when a name still
    uses it, it is gone, or the engine refuses (a container still uses it)."""
    try:
        if client.images.get(image_id).tags:
            return False
        client.images.remove(image_id)
    except docker.errors.APIError:  # ImageNotFound included
        return False
    return True


async def blocking(url: str, func: Callable[[], T], image: str | None = None) -> T:
    """Run one blocking SDK call (a closure or `functools.partial`) in a worker thread,
    its errors mapped. Private to this package: callers above use the backend's methods."""

    def run() -> T:
        with map_docker_errors(url, image):
            return func()

    return await anyio.to_thread.run_sync(run)
