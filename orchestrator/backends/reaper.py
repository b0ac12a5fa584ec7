"""Removing orphans: containers whose owning corral process is gone.

The decision is `owner_is_alive` (pure); this module only lists and removes.
A container of a live owner, or of another host, is never touched.
"""

from __future__ import annotations

import socket

from orchestrator.owner import owner_is_alive, read_boot_id, read_start_time
from sandboxes.ports import ContainerBackend


async def reap_orphans(backend: ContainerBackend) -> list[str]:
    """Remove every corral container whose owner is dead; return their names."""
    host, boot_id = socket.gethostname(), read_boot_id()
    removed = []
    for container in await backend.list_managed({}):
        alive = owner_is_alive(
            container.labels, host=host, boot_id=boot_id, start_time_of=read_start_time
        )
        if alive is False:
            await backend.remove(container.id)
            removed.append(container.name)
    return removed
