"""The kiosk's approval rules (sandboxes.approval_rules): a navigation by
`confirm_urls`; a click, an activating key or a typed newline by what it acts on, read by
the one reader every channel surface uses (`orchestrator.surfaces.acts_on.input_hold`:
the kiosk agent's `target` and `focused` ops). The same reader judges an action before
its approval and again right after it (orchestrator.surfaces.pipeline): what it read is
bound into the approval."""

from __future__ import annotations

from typing import Any

from orchestrator.config import ComputerUseConfig
from orchestrator.surfaces.acts_on import input_hold
from orchestrator.surfaces.kiosk.session import KioskSession
from sandboxes.approval_rules import Hold, navigate_hold
from sandboxes.params import NavigateParams


async def kiosk_hold(session: KioskSession, params: Any, cfg: ComputerUseConfig) -> Hold | None:
    """The rule that makes this call wait, if any, with the target it judged."""
    if isinstance(params, NavigateParams):
        return navigate_hold(params.url, cfg.confirm_urls)
    return await input_hold(session.channel, params, cfg)
