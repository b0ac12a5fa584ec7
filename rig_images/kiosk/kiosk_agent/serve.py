"""The main loop of every agent corral attaches to (the kiosk's and the desktop rig's): one
JSON request per line on stdin, one JSON answer per line on stdout, ops run one at a time.

A thread of its own reads stdin and answers `{"op": "ping"}` at once, while an op runs,
so the gateway tells an agent that is busy (it answers pings) from one that hung (it does
not: a stopped process, a deadlock). That heartbeat is what ends a hung agent's session
within seconds instead of at the deadline of the request in flight
(docs/kiosk-internals.md, "The channel").
"""

from __future__ import annotations

import json
import queue
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .common import OpError, log

Op = Callable[[dict[str, Any]], dict[str, Any]]


class _Out:
    """stdout, one whole line at a time from either thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def write(self, obj: dict[str, Any]) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()


def _read(out: _Out, requests: queue.SimpleQueue[dict[str, Any] | None]) -> None:
    """stdin's lines: pings answered here, everything else queued for the op loop."""
    try:
        for raw in sys.stdin.buffer:
            raw = raw.strip()
            if not raw:
                continue
            try:
                req = json.loads(raw)
            except json.JSONDecodeError as exc:
                out.write({"id": None, "ok": False, "error": f"bad JSON: {exc}"})
                continue
            if not isinstance(req, dict):
                out.write({"id": None, "ok": False, "error": "a request must be a JSON object"})
            elif req.get("op") == "ping":
                out.write({"id": req.get("id"), "ok": True, "pong": True})
            else:
                requests.put(req)
    finally:
        requests.put(None)  # end of stdin: the op loop ends


def _answer(ops: Mapping[str, Op], req: dict[str, Any]) -> dict[str, Any]:
    req_id = req.get("id")
    try:
        handler = ops.get(str(req.get("op")))
        if handler is None:
            raise OpError(f"unknown op {req.get('op')!r}")
        return {"id": req_id, "ok": True, **handler(req)}
    except OpError as exc:
        return {"id": req_id, "ok": False, "error": str(exc)}
    except Exception as exc:  # never die on one bad request
        log("op failed:", repr(exc))
        return {"id": req_id, "ok": False, "error": f"{type(exc).__name__}: {exc}"}


def serve(ops: Mapping[str, Op]) -> None:
    """Run `ops` one at a time on this thread until stdin ends."""
    out = _Out()
    requests: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
    threading.Thread(target=_read, args=(out, requests), name="stdin", daemon=True).start()
    while (req := requests.get()) is not None:
        out.write(_answer(ops, req))
