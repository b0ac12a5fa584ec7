"""A sidecar that removes this process's containers if the process dies.

In-process cleanup (context managers, shielded removal) covers cancellation
and errors, but not a SIGKILL of the owner. For that, the first container a
process starts spawns one small watchdog process per owner. The watchdog
holds the read end of a pipe whose write end only the owner has: when the
owner exits for any reason, the kernel closes the pipe, the watchdog reads EOF
and force-removes every container labelled with the owner's instance id.
No polling, no timers. Each container it removed is audited (`container_reaped`, with
its kind and session): a clean owner leaves none, so each line is work a dead owner left,
a script or a surface that ended without its own answer.

Run as `python -m orchestrator.backends.docker.watchdog --instance ID --url URL
[--audit FILE]`.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import threading
from pathlib import Path

from orchestrator.audit import AuditLog
from orchestrator.backends.reaper import record_reaped
from orchestrator.owner import LABEL_INSTANCE, LABEL_MANAGED, Owner


class OwnerWatchdog:
    def __init__(self, owner: Owner, url: str, audit_file: Path | None = None) -> None:
        self._owner = owner
        self._url = url
        self._audit = [] if audit_file is None else ["--audit", str(audit_file)]
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def ensure_started(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "orchestrator.backends.docker.watchdog",
                    "--instance",
                    self._owner.instance_id,
                    "--url",
                    self._url,
                    *self._audit,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )

    def stop(self) -> None:
        """Close the pipe (the watchdog sweeps, then exits) and wait for it."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sweep(instance_id: str, url: str, audit_file: Path | None = None) -> int:
    """Force-remove every container of `instance_id`, auditing each; how many were removed."""
    from orchestrator.backends.docker.sdk import connect, map_docker_errors
    from orchestrator.errors import CorralError

    client = connect(url)
    removed = 0
    try:
        labels = [f"{LABEL_MANAGED}=true", f"{LABEL_INSTANCE}={instance_id}"]
        with map_docker_errors(url):
            found = client.containers.list(ignore_removed=True, all=True, filters={"label": labels})
        for container in found:
            # Gone or going (EngineError), or the engine too slow to answer this one: the
            # rest are still removed.
            with contextlib.suppress(CorralError), map_docker_errors(url):
                container.remove(force=True, v=True)
                removed += 1
                if audit_file is not None:
                    with contextlib.suppress(CorralError):  # an audit that fails: still reaped
                        record_reaped(AuditLog(audit_file), container.labels)
    finally:
        client.close()
    return removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corral-watchdog")
    parser.add_argument("--instance", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--audit", type=Path, default=None)
    args = parser.parse_args(argv)
    # Block until the owner closes the pipe or dies: both give EOF.
    while sys.stdin.buffer.read(65536):
        pass
    with contextlib.suppress(Exception):
        sweep(args.instance, args.url, args.audit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
