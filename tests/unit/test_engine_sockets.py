"""A call to an engine that does not answer leaves no descriptor open (the SDK's unix
connect leaks its socket when the connect fails; orchestrator.backends.docker.sdk closes
it). The real SDK against a real socket file nobody listens on: no engine needed."""

from __future__ import annotations

import gc
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.backends.docker import sdk

pytestmark = pytest.mark.unit


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def no_collection() -> Iterator[None]:
    """The garbage collector off: a leaked socket stays open where the test can count it."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_calls_to_an_engine_nobody_listens_for_leave_no_socket_open(
    tmp_path: Path, no_collection: None
) -> None:
    dead = tmp_path / "dead.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(dead))  # the file stays; nobody listens: connection refused
    client = sdk.connect(f"unix://{dead}")
    try:
        before = open_descriptors()
        failures = []
        for _ in range(5):
            with pytest.raises(Exception) as caught:
                client.ping()
            failures.append(caught.value)  # held, as a traceback in a cycle would hold it
        assert "Connection refused" in " ".join(str(e) for e in sdk._chain(failures[0]))
        assert open_descriptors() == before
    finally:
        client.close()
