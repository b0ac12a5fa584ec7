"""When a peer that is asked for signs of life has gone silent (pure; the clock is the
caller's). Two heartbeats use it: the agents' channel (orchestrator.backends.channel: the
kiosk's and the desktop rig's agent answer a ping from a thread of their own while an op
runs) and the browser rig's CDP bridge (orchestrator.surfaces.browser.cdp: Chromium
answers its own `Browser.getVersion`).

Silence counts only the time the peer had a question to answer: from the first ping sent
since its last byte, not from the last byte. An op in flight sends nothing until it is
done, so without a ping outstanding a quiet peer is a busy one; and a gateway whose own
loop stalled (a loaded host) sent no ping while it stalled, so the peer owed no answer
for that time. Measured from the last byte, a 2.5 s stall of the gateway's side ended a
healthy desktop rig as hung (series run f-2, on a host with two CPU burners beside the
suite).
"""

from __future__ import annotations

from dataclasses import dataclass

SILENCE_S = 2.5  # a question unanswered this long: the peer hung. Under the 3 s of a
# target read, so a hung agent is named as hung; a hung peer is seen within about 3 s.
HEARTBEAT_S = 0.5  # while an answer is awaited, a ping this often
FIRST_PING_S = 0.1  # the first ping of a request: an op done before it sends no ping


@dataclass
class Liveness:
    """One peer's signs of life: `heard` on every byte from it, `asked` on every ping to
    it, `silent` when a ping has waited SILENCE_S with no byte after it."""

    asked_at: float | None = None  # the first ping since the last byte, if any

    def heard(self) -> None:
        self.asked_at = None

    def asked(self, now: float) -> None:
        if self.asked_at is None:
            self.asked_at = now

    def silent(self, now: float) -> bool:
        return self.asked_at is not None and now - self.asked_at >= SILENCE_S
