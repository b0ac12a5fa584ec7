"""The kiosk agent's CDP client (rig_images/kiosk/kiosk_agent/cdp.py): several calls
written at once are each given their own answer, whatever order the answers come in, and
one call's error is that call's alone. The other end of the pipes here is a thread that
plays the browser's side of the protocol; the same client against real Chromium is
tests/integration/test_kiosk_target.py (every target read sends its calls this way)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "rig_images" / "kiosk"))
from kiosk_agent.cdp import CDP, CDPError

pytestmark = pytest.mark.unit
READERS_END_S = 30.0  # a bound on teardown only: the readers end at EOF, at once


class Browser:
    """Reads `count` messages, then answers them last first: a method named "Fail.x" with
    an error, the others with their own id and params echoed."""

    def __init__(self, read_fd: int, write_fd: int, count: int) -> None:
        self.read_fd, self.write_fd, self.count = read_fd, write_fd, count
        self.seen: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._run, name="fake-browser", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        buf = b""
        while len(self.seen) < self.count:
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return
            buf += chunk
            *whole, buf = buf.split(b"\0")
            self.seen += [json.loads(raw) for raw in whole]
        for msg in reversed(self.seen):
            if msg["method"].startswith("Fail."):
                reply: dict[str, Any] = {"id": msg["id"], "error": {"message": "no such node"}}
            else:
                reply = {"id": msg["id"], "result": {"echo": msg["params"], "id": msg["id"]}}
            os.write(self.write_fd, json.dumps(reply).encode() + b"\0")


@dataclass
class Pipes:
    """Both directions' pipes, and the threads reading them (the fake browser's, the
    client's reader): closed in an order that no thread can outlive."""

    to_browser_r: int
    to_browser_w: int
    to_agent_r: int
    to_agent_w: int
    readers: list[threading.Thread] = field(default_factory=list)

    def browser(self, count: int) -> Browser:
        browser = Browser(self.to_browser_r, self.to_agent_w, count)
        self.readers.append(browser.thread)
        return browser

    def cdp(self) -> CDP:
        cdp = CDP(self.to_browser_w, self.to_agent_r)
        self.readers.append(cdp._reader)
        return cdp

    def close(self) -> None:
        """The write ends first (EOF to both readers), then wait until both readers have
        ended, then the read ends. Closing a read end under a reader that has not yet
        come back to `os.read` let the next test's pipe take the same descriptor number,
        and that old reader took the next test's answer (seen once under two CPU burners:
        "no answer within 10 s")."""
        for fd in (self.to_agent_w, self.to_browser_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        for reader in self.readers:
            reader.join(READERS_END_S)
            assert not reader.is_alive(), f"{reader.name} did not end at EOF"
        for fd in (self.to_browser_r, self.to_agent_r):
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
def pipes() -> Iterator[Pipes]:
    made = Pipes(*os.pipe(), *os.pipe())
    yield made
    made.close()


def test_calls_sent_at_once_get_their_own_answers_and_errors(pipes: Pipes) -> None:
    browser = pipes.browser(3)
    cdp = pipes.cdp()
    answers = cdp.call_all(
        [
            ("DOM.describeNode", {"backendNodeId": 7}, "S1"),
            ("Fail.getBoxModel", {"backendNodeId": 7}, "S1"),
            ("DOM.getBoxModel", {"backendNodeId": 9}, None),
        ],
        timeout=10,
    )
    browser.thread.join(10)
    first, failed, third = answers
    assert isinstance(first, dict) and first["echo"] == {"backendNodeId": 7}
    assert isinstance(failed, CDPError) and "Fail.getBoxModel: no such node" in str(failed)
    assert isinstance(third, dict) and third["echo"] == {"backendNodeId": 9}
    # all three were written before any answer came (the browser answers once it has 3)
    assert [m.get("sessionId") for m in browser.seen] == ["S1", "S1", None]
    assert first["id"] < third["id"]


def test_one_call_raises_its_own_error(pipes: Pipes) -> None:
    pipes.browser(1)
    cdp = pipes.cdp()
    with pytest.raises(CDPError, match=r"Fail\.x: no such node"):
        cdp.call("Fail.x", {}, timeout=10)


def test_a_browser_that_does_not_answer_them_all_times_out(pipes: Pipes) -> None:
    pipes.browser(3)  # waits for a third call that never comes
    cdp = pipes.cdp()
    with pytest.raises(CDPError, match=r"no answer within 0\.2 s"):
        cdp.call_all([("A.a", {}, None), ("B.b", {}, None)], timeout=0.2)
