"""Removing orphans: containers whose owning corral process is gone.

The decision is `reapable` (pure); this module only lists, removes and audits. A
container of a live owner, or of another host, is never touched; nor one whose owner's
watchdog still runs (Docker): that watchdog removes it and audits it in its owner's
audit, where another corral home's reaper would audit it in its own. Each container (a
pod on Kubernetes) removed is audited as `container_reaped` with its kind and session, as
the Docker owner watchdog audits what it removes: a clean owner leaves none, so each line
is work a dead owner left. The objects that only go with a pod (its ConfigMap, its
NetworkPolicies) are removed with it and not audited apart.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from orchestrator.backends.owner import (
    LABEL_AGENT,
    LABEL_KIND,
    LABEL_OWNER_PID,
    LABEL_SESSION,
    read_boot_id,
    read_start_time,
    reapable,
)
from sandboxes.ports import AuditSink, ContainerBackend

REAPED_WHY = "its owner process ended without removing it"


def record_reaped(audit: AuditSink, labels: Mapping[str, str]) -> None:
    """The audit line of one container a dead owner left, removed."""
    audit.record(
        "container_reaped",
        labels.get(LABEL_AGENT),
        {
            "kind": labels.get(LABEL_KIND, ""),
            "session": labels.get(LABEL_SESSION, ""),
            "owner_pid": labels.get(LABEL_OWNER_PID, ""),
            "why": REAPED_WHY,
        },
    )


async def reap_orphans(backend: ContainerBackend, audit: AuditSink | None = None) -> list[str]:
    """Remove every corral container whose owner is dead and whose owner's watchdog is
    gone too; return their names. With `audit`, each container removed is audited
    (`container_reaped`)."""
    host, boot_id = socket.gethostname(), read_boot_id()
    removed = []
    for container in await backend.list_managed({}):
        if reapable(container.labels, host=host, boot_id=boot_id, start_time_of=read_start_time):
            await backend.remove(container.id)
            removed.append(container.name)
            if audit is not None and container.runs:
                record_reaped(audit, container.labels)
    return removed
