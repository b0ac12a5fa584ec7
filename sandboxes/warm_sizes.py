"""How many surfaces of each kind the gateway keeps started ahead (issue 23, "fast by
default"): what config.toml says (`[container.kiosk] warm`, `[container.rigs]
browser_warm`, `desktop_warm`), or, where it says nothing, `default` (1 unless
$CORRAL_WARM_DEFAULT says otherwise) for each kind at least one agent may start, and 0
for a kind no agent may: an unused kind holds no memory."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sandboxes.catalogue import BY_NAME
from sandboxes.visibility import AgentView, decide

WARM_KINDS = ("kiosk", "browser", "desktop")
# The tools whose first call starts a surface of each kind (the desktop rig is also
# codrive's shared desktop).
STARTED_BY: dict[str, tuple[str, ...]] = {
    "kiosk": ("computer_session_start",),
    "browser": ("browser_use",),
    "desktop": ("computer_use", "codrive_run"),
}


def kinds_in_use(views: Iterable[AgentView]) -> frozenset[str]:
    """The kinds at least one of `views` may start (a tool of the kind is visible)."""
    used: set[str] = set()
    for view in views:
        for kind, tools in STARTED_BY.items():
            if kind not in used and any(decide(BY_NAME[t], view).visible for t in tools):
                used.add(kind)
    return frozenset(used)


def warm_sizes(
    configured: Mapping[str, int | None], in_use: frozenset[str], default: int
) -> dict[str, int]:
    """Each kind's pool size: the configured one, else `default` if the kind is in use."""
    sizes = {}
    for kind in WARM_KINDS:
        size = configured.get(kind)
        sizes[kind] = size if size is not None else (default if kind in in_use else 0)
    return sizes
