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
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "rig_images" / "kiosk"))
from kiosk_agent.cdp import CDP, CDPError

pytestmark = pytest.mark.unit


class Browser:
    """Reads `count` messages, then answers them last first: a method named "Fail.x" with
    an error, the others with their own id and params echoed."""

    def __init__(self, read_fd: int, write_fd: int, count: int) -> None:
        self.read_fd, self.write_fd, self.count = read_fd, write_fd, count
        self.seen: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
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


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    to_browser_r, to_browser_w = os.pipe()
    to_agent_r, to_agent_w = os.pipe()
    yield to_browser_r, to_browser_w, to_agent_r, to_agent_w
    for fd in (to_agent_w, to_browser_w, to_browser_r, to_agent_r):  # EOF to the readers first
        with contextlib.suppress(OSError):
            os.close(fd)


def test_calls_sent_at_once_get_their_own_answers_and_errors(
    pipes: tuple[int, int, int, int],
) -> None:
    to_browser_r, to_browser_w, to_agent_r, to_agent_w = pipes
    browser = Browser(to_browser_r, to_agent_w, 3)
    cdp = CDP(to_browser_w, to_agent_r)
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


def test_one_call_raises_its_own_error(pipes: tuple[int, int, int, int]) -> None:
    to_browser_r, to_browser_w, to_agent_r, to_agent_w = pipes
    Browser(to_browser_r, to_agent_w, 1)
    cdp = CDP(to_browser_w, to_agent_r)
    with pytest.raises(CDPError, match=r"Fail\.x: no such node"):
        cdp.call("Fail.x", {}, timeout=10)


def test_a_browser_that_does_not_answer_them_all_times_out(
    pipes: tuple[int, int, int, int],
) -> None:
    to_browser_r, to_browser_w, to_agent_r, to_agent_w = pipes
    Browser(to_browser_r, to_agent_w, 3)  # waits for a third call that never comes
    cdp = CDP(to_browser_w, to_agent_r)
    with pytest.raises(CDPError, match=r"no answer within 0\.2 s"):
        cdp.call_all([("A.a", {}, None), ("B.b", {}, None)], timeout=0.2)
