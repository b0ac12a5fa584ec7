"""CDP over Chromium's --remote-debugging-pipe: JSON messages terminated by NUL."""

from __future__ import annotations

import json
import os
import queue
import select
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .common import OpError, log

CDP_TIMEOUT_S = 10.0


class CDPError(OpError):
    pass


Call = tuple[str, dict[str, Any], "str | None"]  # method, params, session


def _result(method: str, reply: dict[str, Any] | None) -> dict[str, Any] | CDPError:
    if reply is None:
        return CDPError(f"{method}: the browser went away")
    if "error" in reply:
        err = reply["error"]
        return CDPError(f"{method}: {err.get('message', err)}")
    result: dict[str, Any] = reply.get("result", {})
    return result


class _Waiter:
    """Collects CDP events matching a predicate (registered before the command that causes
    them, so nothing is lost)."""

    def __init__(self, predicate: Callable[[dict[str, Any]], bool]) -> None:
        self.predicate = predicate
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()


class _Slot:
    """One call's answer: set by the reader thread (reply None: the pipe closed)."""

    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None


class CDP:
    """CDP over Chromium's --remote-debugging-pipe. Thread-safe calls; one reader thread."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd = write_fd
        self.read_fd = read_fd
        os.set_blocking(write_fd, False)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, _Slot] = {}
        self._waiters: list[_Waiter] = []
        self.closed = False
        self.detached_sessions: set[str] = set()
        self._reader = threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True)
        self._reader.start()

    def _read_loop(self) -> None:
        buf = bytearray()
        scan = 0
        try:
            while True:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    break
                buf += chunk
                while True:
                    end = buf.find(b"\0", scan)
                    if end < 0:
                        scan = len(buf)
                        break
                    raw = bytes(buf[:end])
                    del buf[: end + 1]
                    scan = 0
                    try:
                        self._dispatch(json.loads(raw))
                    except Exception as exc:  # a bad message must not kill the reader
                        log("cdp: bad message:", exc)
        except OSError as exc:
            log("cdp: read failed:", exc)
        finally:
            self.closed = True
            with self._lock:
                pending = list(self._pending.values())
                waiters = list(self._waiters)
            for slot in pending:
                slot.done.set()
            for waiter in waiters:
                waiter.events.put(None)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "id" in msg:
            with self._lock:
                slot = self._pending.pop(msg["id"], None)
            if slot is not None:
                slot.reply = msg
                slot.done.set()
            return
        if msg.get("method") == "Target.detachedFromTarget":
            sid = msg.get("params", {}).get("sessionId")
            if sid:
                self.detached_sessions.add(sid)
        with self._lock:
            waiters = list(self._waiters)
        for waiter in waiters:
            try:
                if waiter.predicate(msg):
                    waiter.events.put(msg)
            except Exception:
                pass

    def _write(self, data: bytes, deadline: float) -> None:
        with self._write_lock:
            view = memoryview(data)
            while view:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CDPError("CDP pipe: write timed out")
                _, writable, _ = select.select([], [self.write_fd], [], remaining)
                if not writable:
                    continue
                try:
                    sent = os.write(self.write_fd, view)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise CDPError(f"CDP pipe closed: {exc}") from exc
                view = view[sent:]

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = CDP_TIMEOUT_S,
    ) -> dict[str, Any]:
        answer = self.call_all([(method, params or {}, session)], timeout)[0]
        if isinstance(answer, CDPError):
            raise answer
        return answer

    def call_all(
        self, calls: Sequence[Call], timeout: float = CDP_TIMEOUT_S
    ) -> list[dict[str, Any] | CDPError]:
        """Several calls written at once and their answers awaited together: each call's
        result, or the CDPError it got. The browser answers each in turn as it always
        does; what is saved is a round trip through this process (and the scheduler) per
        call after the first. Only for calls that do not depend on each other's answers.
        A pipe that fails or times out raises for them all."""
        if self.closed:
            raise CDPError("the browser is gone (CDP pipe closed)")
        deadline = time.monotonic() + timeout
        slots: list[tuple[int, str, _Slot]] = []
        data = b""
        with self._lock:
            for method, params, session in calls:
                self._next_id += 1
                slots.append((self._next_id, method, _Slot()))
                self._pending[self._next_id] = slots[-1][2]
                msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
                if session:
                    msg["sessionId"] = session
                data += json.dumps(msg).encode() + b"\0"
        try:
            self._write(data, deadline)
            for _, method, slot in slots:
                if not slot.done.wait(max(0.0, deadline - time.monotonic())):
                    raise CDPError(f"{method}: no answer within {timeout:g} s")
        finally:
            with self._lock:
                for msg_id, _, _ in slots:
                    self._pending.pop(msg_id, None)
        return [_result(method, slot.reply) for _, method, slot in slots]

    def expect(self, predicate: Callable[[dict[str, Any]], bool]) -> _Waiter:
        waiter = _Waiter(predicate)
        with self._lock:
            self._waiters.append(waiter)
        return waiter

    def unexpect(self, waiter: _Waiter) -> None:
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
