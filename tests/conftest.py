"""Shared fixtures. Markers follow the folder: unit / integration / e2e / faults."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from testcontainers.core.config import testcontainers_config

from orchestrator.home import CorralHome
from tests.images import ENV

if TYPE_CHECKING:
    import docker

# testcontainers' reaper (Ryuk) is an image from a registry, and nothing is pulled here: off
# for the whole session, set before any helper container starts (the attribute outranks the
# TESTCONTAINERS_RYUK_DISABLED variable, which is also set for anything that reads it).
# The fixtures that start helper containers remove them; `no_container_left_behind` checks.
os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
testcontainers_config.ryuk_disabled = True

TESTS = Path(__file__).resolve().parent
FOLDERS = ("unit", "integration", "e2e", "faults")  # each folder's marker is its name


def folder_marker(path: Path) -> str | None:
    """The marker of the test folder `path` is in (tests/<folder>/...), or None."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 and parts[0] in FOLDERS else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Checked as a marker, not a keyword: a folder's name is already a keyword of every
    # test in it, so `marker in item.keywords` would skip adding the marker at all.
    for item in items:
        marker = folder_marker(Path(str(item.path)))
        if marker is not None and item.get_closest_marker(marker) is None:
            item.add_marker(marker)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test`'s workers share the suite as tests/scheduling.py says."""
    from tests.scheduling import UnitScheduling

    return UnitScheduling(config, log)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before the suite (the controller under xdist): corral containers whose owner was gone
    before it began (a run killed with its engine, on this machine) are removed and named,
    so that the check at the end counts only what this run leaked."""
    left = _remove_leftovers_of_dead_owners(session)
    if left:
        print(f"\nremoved before the suite, left by an earlier run: {left}", file=sys.stderr)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under xdist, the controller's check once every worker has ended: no corral container
    of a dead owner may remain (a worker checks only its own, as another worker's killed
    gateway may still be being cleaned up while it ends)."""
    names = _remove_leftovers_of_dead_owners(session)
    if names:
        print(f"\ncontainers leaked by the suite (owner gone): {names}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _remove_leftovers_of_dead_owners(session: pytest.Session) -> list[tuple[Any, ...]]:
    """In the xdist controller only (a worker's own fixture checks its own), the corral
    containers of dead owners, removed; [] when no engine answers (only unit tests run)."""
    from tests.helpers import in_xdist_worker

    if in_xdist_worker() or not getattr(session.config.option, "numprocesses", None):
        return []  # a worker, or no xdist: the session fixture `no_container_left_behind` checks
    import docker

    try:
        client = docker.from_env(version="1.41", timeout=5)
        client.ping()
    except Exception:  # no engine: only unit tests run (they need none)
        return []
    from tests.helpers import leftovers_of_dead_owners, remove_and_wait

    try:
        left = leftovers_of_dead_owners(client)
        names = [(c.name, c.labels.get("corral.kind"), c.status) for c in left]
        for container in left:
            remove_and_wait(container)
    finally:
        client.close()
    return names


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def corral_home(tmp_path: Path) -> CorralHome:
    home = CorralHome(root=tmp_path / "corral-home", env=ENV)  # as the CLI reads it
    home.ensure()
    return home


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    import docker

    client = docker.from_env(version="1.41")
    try:
        client.ping()
    except Exception as exc:  # a clear failure, never a skip
        pytest.fail(f"the Docker engine does not answer ({exc}); run `make test`", pytrace=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def no_container_left_behind(docker_client: docker.DockerClient) -> Iterator[None]:
    """After the whole suite, no container labelled as corral's may remain (SPEC S0).
    Not autouse here: the Docker-backed folders switch it on, so unit tests need no engine."""
    from tests.helpers import leaked_containers, remove_and_wait

    yield
    left = leaked_containers(docker_client)
    names = [(c.name, c.labels.get("corral.kind"), c.status) for c in left]
    for container in left:
        remove_and_wait(container)
    assert not names, f"containers leaked by the suite: {names}"
