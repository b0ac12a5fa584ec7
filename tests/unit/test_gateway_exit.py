"""`corral gateway` exits once every session has ended even when a worker thread is still
blocked in a call that never returns (corral_cli/gateway.py): bounded, its stack on
stderr. A real thread, blocked for good, in a real child process."""

from __future__ import annotations

import subprocess
import sys

STUCK = """
import threading, corral_cli.gateway as g
g.THREADS_JOIN_SECONDS = 0.5
blocked = threading.Event()
def wait_forever():
    blocked.set()
    threading.Event().wait()  # an engine call that never returns
threading.Thread(target=wait_forever, name="AnyIO worker thread").start()
blocked.wait()
g._exit_past_stuck_threads()
print("not reached")
"""

CLEAN = """
import threading, corral_cli.gateway as g
t = threading.Thread(target=lambda: None, name="done soon")
t.start()
g._exit_past_stuck_threads()
print("returned")
"""


def test_a_thread_blocked_for_good_does_not_keep_a_stopped_gateway_alive() -> None:
    done = subprocess.run([sys.executable, "-c", STUCK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "not reached" not in done.stdout
    assert "left behind: AnyIO worker thread" in done.stderr
    assert "wait_forever" in done.stderr  # its stack, to find the call that hung


def test_without_a_stuck_thread_the_exit_is_the_normal_one() -> None:
    done = subprocess.run([sys.executable, "-c", CLEAN], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "returned" in done.stdout and done.stderr == ""
