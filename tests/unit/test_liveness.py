"""When a peer asked for signs of life has gone silent (sandboxes.liveness)."""

from __future__ import annotations

import pytest

from sandboxes.liveness import SILENCE_S, Liveness

pytestmark = pytest.mark.unit


def test_a_peer_never_asked_is_not_silent_however_long_it_says_nothing() -> None:
    """A busy op sends nothing until it is done, and a gateway that stalled sent no ping:
    neither is silence."""
    life = Liveness()
    assert not life.silent(0.0)
    assert not life.silent(1000.0)


def test_silence_counts_from_the_first_ping_since_the_last_byte() -> None:
    life = Liveness()
    life.asked(10.0)
    life.asked(10.5)  # later pings do not move the question's start
    assert not life.silent(10.0 + SILENCE_S - 0.01)
    assert life.silent(10.0 + SILENCE_S)


def test_a_byte_answers_every_ping_before_it() -> None:
    life = Liveness()
    life.asked(10.0)
    life.heard()
    assert not life.silent(10.0 + 10 * SILENCE_S)
    life.asked(50.0)  # the next question starts its own count
    assert not life.silent(50.0 + SILENCE_S / 2)
    assert life.silent(50.0 + SILENCE_S)


def test_a_stall_of_the_asker_is_not_the_peers_silence() -> None:
    """The gateway's loop stalled 3 s with no ping sent (series run f-2): the first ping
    after it gives the peer its whole SILENCE_S."""
    life = Liveness()
    life.asked(0.1)
    life.heard()  # answered at once
    stalled_until = 0.1 + 3.0
    life.asked(stalled_until)
    assert not life.silent(stalled_until + 0.01)
