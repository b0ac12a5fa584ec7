"""A sidecar that removes this process's containers if the process dies.

In-process cleanup (context managers, shielded removal) covers cancellation
and errors, but not a SIGKILL of the owner. For that, the first container a
process starts spawns one small watchdog process per owner. The watchdog
holds the read end of a pipe whose write end only the owner has: when the
owner exits for any reason, the kernel closes the pipe, the watchdog reads EOF
and force-removes every container labelled with the owner's instance id.
No polling. A create the owner had in flight when it died may land after that sweep: the
owner announces each create on the same pipe (`in_flight`), and the watchdog follows the
engine's create events until each announced one landed and was removed too, bounded by
`in_flight.LATE_CREATE_LIMIT`. Each container it removed is audited (`container_reaped`, with
its kind and session): a clean owner leaves none, so each line is work a dead owner left,
a script or a surface that ended without its own answer.

Run as `python -m orchestrator.backends.docker.watchdog --instance ID --url URL
[--audit FILE]`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors

from orchestrator.audit import AuditLog
from orchestrator.backends.docker.in_flight import (
    LABEL_CREATE,
    LATE_CREATE_LIMIT,
    InFlight,
    announced,
    answered,
    new_token,
)
from orchestrator.backends.owner import (
    LABEL_INSTANCE,
    LABEL_MANAGED,
    Owner,
    read_start_time,
    watchdog_labels,
)
from orchestrator.backends.reaper import record_reaped


class OwnerWatchdog:
    def __init__(self, owner: Owner, url: str, audit_file: Path | None = None) -> None:
        self._owner = owner
        self._url = url
        self._audit = [] if audit_file is None else ["--audit", str(audit_file)]
        self._proc: subprocess.Popen[bytes] | None = None
        self._labels: dict[str, str] = {}  # the running watchdog's, on each container
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
            self._labels = watchdog_labels(self._proc.pid, read_start_time(self._proc.pid))

    @contextlib.contextmanager
    def creating(self) -> Iterator[dict[str, str]]:
        """Around one blocking create request: yields the labels it must carry (its token,
        and the watchdog that will remove it: `owner.reapable`), and tells the watchdog
        the create is in flight until the engine answered it (created, or refused with an
        API error). A request that timed out or lost its connection stays announced: the
        engine may still create it."""
        token = new_token()
        self._tell(announced(token))
        try:
            yield {LABEL_CREATE: token, **self._labels}
        except docker.errors.APIError:
            self._tell(answered(token))
            raise
        self._tell(answered(token))

    def _tell(self, line: bytes) -> None:
        """One line to the watchdog, in one write (atomic on a pipe). A watchdog that is
        gone is restarted by the next `ensure_started`; nothing to tell it now."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None:
                return
            with contextlib.suppress(OSError, ValueError):
                os.write(proc.stdin.fileno(), line)

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


def sweep(
    instance_id: str, url: str, audit_file: Path | None = None, in_flight: InFlight | None = None
) -> int:
    """Force-remove every container of `instance_id`, auditing each; how many were removed.
    With creates still `in_flight`, the engine's create events are followed (from before
    the list) until each of them landed and was removed, or `LATE_CREATE_LIMIT` passed."""
    from orchestrator.backends.docker.sdk import connect, map_docker_errors

    waiting = in_flight if in_flight is not None and in_flight.pending else None
    client = connect(url)
    audit = None if audit_file is None else AuditLog(audit_file)
    try:
        labels = [f"{LABEL_MANAGED}=true", f"{LABEL_INSTANCE}={instance_id}"]
        events = None if waiting is None else _create_events(client, labels)
        with map_docker_errors(url):
            found = client.containers.list(ignore_removed=True, all=True, filters={"label": labels})
        removed = sum(_remove(client, url, c.id or "", c.labels, audit) for c in found)
        if waiting is not None and events is not None:
            for container in found:
                waiting.landed(container.labels)
            removed += _remove_late(client, url, events, waiting, audit)
    finally:
        client.close()
    return removed


def _create_events(client: docker.DockerClient, labels: list[str]) -> Any:
    """The engine's create events of these labels, from a little before now (the stream
    is open when this returns, so no create between it and the sweep's list is missed)."""
    return client.events(
        since=int(time.time()) - 5,
        filters={"type": "container", "event": "create", "label": labels},
        decode=True,
    )


def _remove_late(
    client: docker.DockerClient, url: str, events: Any, waiting: InFlight, audit: AuditLog | None
) -> int:
    """Remove the announced creates as their events come, until none is waited for or the
    limit passed (then the stream is closed under the loop)."""
    removed = 0
    timer = threading.Timer(LATE_CREATE_LIMIT, events.close)
    timer.start()
    try:
        with contextlib.suppress(Exception):  # the stream closed under us: the limit passed
            for event in events:
                actor = event.get("Actor", {})
                attributes = actor.get("Attributes", {})
                if waiting.landed(attributes):
                    removed += _remove(client, url, actor.get("ID", ""), attributes, audit)
                if not waiting.pending:
                    break
    finally:
        timer.cancel()
        events.close()
    return removed


def _remove(
    client: docker.DockerClient,
    url: str,
    container_id: str,
    labels: Mapping[str, str],
    audit: AuditLog | None,
) -> int:
    """Force-remove one container and audit it: 1, or 0 if the engine did not (gone or
    going, or too slow to answer this one: the rest are still removed)."""
    from orchestrator.backends.docker.sdk import map_docker_errors
    from orchestrator.errors import CorralError

    with contextlib.suppress(CorralError), map_docker_errors(url):
        client.api.remove_container(container_id, force=True, v=True)
        if audit is not None:
            with contextlib.suppress(CorralError):  # an audit that fails: still reaped
                record_reaped(audit, labels)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corral-watchdog")
    parser.add_argument("--instance", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--audit", type=Path, default=None)
    args = parser.parse_args(argv)
    # Until the owner closes the pipe or dies (both give EOF), it announces its creates.
    in_flight = InFlight()
    for line in sys.stdin.buffer:
        in_flight.read(line)
    with contextlib.suppress(Exception):
        sweep(args.instance, args.url, args.audit, in_flight)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
