"""Work in flight, on disk: what a gateway had open when it was killed, closed at the next
start (issue 26: the gateway killed with an approval pending, a codrive run mid-step and
a take over in progress).

The ledger follows the audit, so what opens and closes work is said once, here (`WORK`):
an audited event that opens work (an approval raised, a codrive run started, a take
over, a surface started) adds an entry to this gateway's file, and the event that closes
it (decided, ended, handed back, the surface ended) removes it. Each change rewrites the
file whole (a new file renamed over the old one: a reader sees the old or the new, never
half of one). No fsync: a killed process loses nothing the kernel already holds; a power
cut may lose the last change, as it may lose the audit's last lines.

At its start a gateway reads every file in `CORRAL_HOME/inflight/` whose owner process
is gone (`owner_is_alive`, as the reaper decides for containers) and writes each entry's
closing audit line, marked `recovered`: the approval withdrawn (never approved by
default), the run failed with the reason, the take over ended, the surface ended. Its
containers are the reaper's and the owner watchdog's. A ledger that cannot be written
is logged and skipped: the audit, written first, stays the record of what was decided.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.audit import AuditLog
from orchestrator.backends.owner import Owner, owner_is_alive, read_boot_id, read_start_time

logger = logging.getLogger("corral.gateway")

GATEWAY_STOPPED = "the gateway stopped before it ended (killed or crashed)"


@dataclass(frozen=True, slots=True)
class Work:
    """A kind of work: the audited event that opens it, the detail that names it, the
    events that close it, and the closing line a dead gateway's entry gets."""

    kind: str
    key: str  # the detail naming it (approval id, run id, session or rig id)
    closed_by: tuple[str, ...]
    closing: Callable[[Mapping[str, Any]], tuple[str, dict[str, Any]]]


def _approval(entry: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    reason = f"withdrawn: {GATEWAY_STOPPED}; nothing is approved by default"
    return "approval_decided", {
        "approval": entry["approval"],
        "session": entry.get("session"),
        "operator": None,
        "decision": "cancelled",
        "reason": reason,
        "latency_ms": None,
    }


def _run(entry: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    return "codrive_run_ended", {
        "run": entry["run"],
        "state": "failed",
        "steps_done": entry.get("steps_done", 0),
        "reason": run_failed_reason(entry),
    }


def _take_over(entry: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    return "takeover_ended", {
        "session": entry["session"],
        "seat": entry.get("seat"),
        "operator": entry.get("operator"),
        "why": f"{GATEWAY_STOPPED}; the seat ended with its surface",
    }


def _session(entry: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    return "computer_session_ended", {"session": entry["session"], "why": GATEWAY_STOPPED}


def _rig(entry: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    return "rig_ended", {"rig": entry["rig"], "why": GATEWAY_STOPPED}


SURFACE_ENDS = ("computer_session_ended", "rig_ended")
WORK: dict[str, Work] = {
    "approval_raised": Work("approval", "approval", ("approval_decided",), _approval),
    "codrive_run_started": Work("codrive_run", "run", ("codrive_run_ended",), _run),
    # a take over ends with a hand back, or with its surface (stopped while a person held it)
    "takeover": Work("take_over", "session", ("handback", *SURFACE_ENDS), _take_over),
    "computer_session_started": Work(
        "kiosk_session", "session", ("computer_session_ended",), _session
    ),
    "rig_started": Work("rig", "rig", ("rig_ended",), _rig),
}
BY_KIND = {work.kind: work for work in WORK.values()}
CLOSERS: dict[str, list[Work]] = {}
for _work in WORK.values():
    for _event in _work.closed_by:
        CLOSERS.setdefault(_event, []).append(_work)
STEP_DONE = "codrive_step"  # counted on its run's entry


def run_failed_reason(entry: Mapping[str, Any]) -> str:
    done = int(entry.get("steps_done", 0))
    return (
        f"{GATEWAY_STOPPED} while this run was going ({done} of {entry.get('steps', '?')} "
        "steps done); a run does not resume after a restart: start it again"
    )


@dataclass(eq=False)
class Ledger:
    """This gateway's work in flight, in `directory/<instance>.json`."""

    directory: Path
    owner: Owner
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.directory / f"{self.owner.instance_id}.json"

    def follow(self, event: str, agent: str | None, details: Mapping[str, Any]) -> None:
        """An audited event (after it was written): open, count or close work."""
        changed = False
        work = WORK.get(event)
        if work is not None and details.get(work.key):
            name = f"{work.kind}:{details[work.key]}"
            self.entries[name] = {"kind": work.kind, "agent": agent, **_kept(details)}
            changed = True
        for closer in CLOSERS.get(event, ()):
            for name, entry in list(self.entries.items()):
                if entry["kind"] == closer.kind and _names(entry, closer.key, details):
                    del self.entries[name]
                    changed = True
        if event == STEP_DONE and (run := self.entries.get(f"codrive_run:{details.get('run')}")):
            run["steps_done"] = int(run.get("steps_done", 0)) + 1
            changed = True
        if changed:
            self._write()

    def close(self) -> None:
        """A gateway that stopped in order has ended its work: its file goes."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _write(self) -> None:
        owner = self.owner.labels(kind="gateway", agent="", session="")
        body: dict[str, Any] = {"owner": owner, "work": self.entries}
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(body, fh, separators=(",", ":"), sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as exc:
            logger.warning("corral gateway: the ledger of work in flight failed: %s", exc)


def _kept(details: Mapping[str, Any]) -> dict[str, Any]:
    """What an entry keeps of its opening event: the ids and counts its closing line
    names (never anything else the event carried)."""
    kept = ("approval", "run", "session", "rig", "seat", "operator", "app", "steps", "surface")
    return {k: details[k] for k in kept if k in details and details[k] is not None}


def _names(entry: Mapping[str, Any], key: str, details: Mapping[str, Any]) -> bool:
    """Whether a closing event's details name this entry: by its own key, or, for a take
    over closed by its surface's end, by the surface's id (a rig's is `rig`)."""
    mine = entry.get(key)
    return mine is not None and mine in (details.get(key), details.get("rig"))


@dataclass(frozen=True, slots=True)
class Recovered:
    """One entry of a dead gateway's ledger, closed in the audit at this start."""

    kind: str
    agent: str | None
    entry: Mapping[str, Any]


def close_left_work(
    directory: Path,
    audit: AuditLog,
    *,
    start_time_of: Callable[[int], int | None] = read_start_time,
) -> list[Recovered]:
    """Close the work of every gateway whose ledger is here and whose process is gone:
    one closing audit line per entry (`recovered: true`), then its file goes. A live
    gateway's ledger, or another host's, is left alone."""
    host, boot = socket.gethostname(), read_boot_id()
    closed: list[Recovered] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
            owner, work = dict(body["owner"]), dict(body["work"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("corral gateway: unreadable ledger %s left as it is: %s", path, exc)
            continue
        if owner_is_alive(owner, host=host, boot_id=boot, start_time_of=start_time_of) is not False:
            continue
        for entry in work.values():
            kind = BY_KIND.get(str(entry.get("kind")))
            if kind is None:  # written by another version of corral: nothing to close it by
                logger.warning("corral gateway: %s: unknown work %r left open", path, entry)
                continue
            event, details = kind.closing(entry)
            audit.record(event, entry.get("agent"), {**details, "recovered": True})
            closed.append(Recovered(kind.kind, entry.get("agent"), entry))
        path.unlink()
    return closed
