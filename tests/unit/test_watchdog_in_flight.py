"""What an owner tells its watchdog about creates in flight (`in_flight`), as lines on the
pipe; the watchdog's waiting on real late creates: tests/integration/test_owner_watchdog.py."""

from __future__ import annotations

import pytest

from orchestrator.backends.docker.in_flight import (
    LABEL_CREATE,
    InFlight,
    announced,
    answered,
    new_token,
)

pytestmark = pytest.mark.unit


def test_a_create_is_pending_from_its_announcement_until_the_engine_answered() -> None:
    first, second = new_token(), new_token()
    seen = InFlight()
    for line in (announced(first), announced(second), answered(first)):
        seen.read(line)
    assert seen.pending == {second}


def test_each_line_fits_one_atomic_pipe_write_and_tokens_differ() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    assert all(len(announced(t)) <= 34 and len(answered(t)) <= 34 for t in tokens)


@pytest.mark.parametrize("line", [b"", b"\n", b"+\n", b"-\n", b"?abc\n", b"\xff\xfe\n"])
def test_lines_that_are_not_announcements_change_nothing(line: bytes) -> None:
    seen = InFlight({"kept"})
    seen.read(line)
    assert seen.pending == {"kept"}


def test_a_container_that_landed_is_waited_for_no_more_and_others_are_not_its() -> None:
    token = new_token()
    seen = InFlight()
    seen.read(announced(token))
    assert not seen.landed({})  # a container from before the protocol, or a stranger's
    assert not seen.landed({LABEL_CREATE: new_token()})  # an answered create of the owner
    assert seen.landed({LABEL_CREATE: token, "corral.kind": "script"})
    assert seen.pending == set()
    assert not seen.landed({LABEL_CREATE: token})  # seen once: the second time is not news
