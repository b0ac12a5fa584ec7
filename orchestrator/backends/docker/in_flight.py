"""Creates a dying owner had in flight, for its watchdog.

The watchdog's sweep lists the owner's containers once the owner is gone. A create the
owner sent just before it died (a warm pool refilling, a session starting) may be answered
by the engine after that list: the container would outlive its owner with nobody left to
remove it. So the owner tells its watchdog, over the same pipe whose EOF says it died,
about each create: `+TOKEN` before the request, `-TOKEN` once the engine answered it
(created, or refused). The create carries the token as a label (`LABEL_CREATE`). A token
still announced at EOF is a create that may land late: the watchdog follows the engine's
create events (opened before its sweep lists) until each such token's container was seen,
or `LATE_CREATE_LIMIT` passed (a request that never reached the engine never lands).

A create whose request timed out or lost its connection stays announced even while the
owner lives: the engine may still answer it, and only a create it answered is settled.
The protocol is lines of at most 34 bytes, each written with one `write` (atomic on a
pipe), so creates in several threads never interleave.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

LABEL_CREATE = "corral.create"
LATE_CREATE_LIMIT = 60.0  # seconds a dead owner's watchdog waits for its announced creates


def new_token() -> str:
    return uuid.uuid4().hex


def announced(token: str) -> bytes:
    """The line an owner writes before it sends a create labelled with `token`."""
    return f"+{token}\n".encode()


def answered(token: str) -> bytes:
    """The line an owner writes once the engine answered that create."""
    return f"-{token}\n".encode()


@dataclass(slots=True)
class InFlight:
    """The creates an owner announced and the engine has not answered (as far as the
    owner told): fed line by line, then matched against the containers that landed."""

    pending: set[str] = field(default_factory=set)

    def read(self, line: bytes) -> None:
        """One line from the owner; anything else than `+TOKEN` / `-TOKEN` is ignored."""
        text = line.decode("ascii", errors="replace").strip()
        sign, token = text[:1], text[1:]
        if not token:
            return
        if sign == "+":
            self.pending.add(token)
        elif sign == "-":
            self.pending.discard(token)

    def landed(self, labels: Mapping[str, str]) -> bool:
        """Whether a container with these labels is one of the announced creates (then it
        is no longer waited for)."""
        token = labels.get(LABEL_CREATE)
        if token is None or token not in self.pending:
            return False
        self.pending.discard(token)
        return True
