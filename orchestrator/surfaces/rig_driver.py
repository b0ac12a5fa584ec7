"""What every rig shares beside the pipeline: its driver (the rig's own `run`) and the
rig_list answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.surfaces.answers import Answer, answer, text_block
from orchestrator.surfaces.base import Surface
from orchestrator.surfaces.phones import MobileRig
from orchestrator.surfaces.pipeline import Action, Done


class RigDriver:
    """Every rig's driver for the pipeline: its own `run` (what a verb means there); no
    rule or approval of its own yet, and no timeline (the console's is the kiosk's)."""

    refused_event = "rig_action_refused"
    done_event = "rig_action"
    stop_with = "Close it with rig_close"
    keeps_timeline = False

    async def rules(self, rig: Any, action: Action) -> None:
        return None

    async def hold(self, rig: Any, action: Action) -> None:
        return None

    async def act(self, rig: Any, action: Action, status: str) -> Done:
        return Done(await rig.run(action.params, status))


RIG_DRIVER = RigDriver()


def rig_list_answer(rigs: Mapping[str, Surface], now: float) -> Answer:
    """rig_list: the agent's rigs by surface, with their budget and time left."""
    rows: list[dict[str, Any]] = []
    for surface, rig in sorted(rigs.items()):
        idle, life = rig.clock.time_left(now)
        rows.append(
            {
                "rig_id": rig.id,
                "surface": surface,
                "state": rig.state,
                "screen": f"{rig.width}x{rig.height}",
                "device": rig.device if isinstance(rig, MobileRig) else None,
                "controller": rig.controller,
                "actions_used": rig.clock.used,
                "max_actions": rig.clock.max_actions,
                "idle_seconds_left": idle,
                "lifetime_seconds_left": life,
            }
        )
    if not rows:
        return answer(text_block("You have no rig."), rigs=[])
    lines = [
        f"{row['rig_id']}: {row['surface']}, {row['state']}, {row['screen']}, "
        f"controlled by {'the AI' if row['controller'] == 'ai' else 'a person'}, "
        f"{row['actions_used']}/{row['max_actions']} actions, "
        f"{row['lifetime_seconds_left']} s of lifetime left"
        for row in rows
    ]
    return answer(text_block("\n".join(lines)), rigs=rows)
