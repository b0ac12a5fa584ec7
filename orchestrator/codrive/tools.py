"""codrive_run and codrive_status (SPEC S3), served from the room above surfaces: the
gateway builds `CodriveTools` and registers it with the rig manager, which gates the call
(capability, permissions, parameters) and hands over the params. A run drives the agent's
desktop rig, started if needed; surfaces never import codrive.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from orchestrator.audit import AuditLog
from orchestrator.codrive.desktop import RigDesktop
from orchestrator.codrive.runs import CodriveRun, CodriveRuns
from orchestrator.codrive.step import StepRules
from orchestrator.config import ComputerUseConfig
from orchestrator.errors import SessionRefused
from orchestrator.surfaces.answers import Answer, answer, text_block
from orchestrator.surfaces.desktop import DesktopRig
from orchestrator.surfaces.oversight import Oversight
from orchestrator.surfaces.rigs import RigManager
from sandboxes.catalogue import CODRIVE_TOOLS
from sandboxes.codrive import CodriveRunParams, CodriveStatusParams
from sandboxes.events import CallEvents
from sandboxes.fence import fence
from sandboxes.ladder import StepResult
from sandboxes.results import NO_RUN

APP_DEADLINE = 45.0  # starting a target app (the agent waits up to 40 s for its window)
Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], Any]


class CodriveTools:
    def __init__(
        self,
        rigs: RigManager,
        oversight: Oversight,
        audit: AuditLog,
        spawn: Spawn,
        *,
        handoff_timeout: float,
    ) -> None:
        """`spawn` runs a codrive run in the gateway's task group (it outlives the call);
        its approvals go to the console's queue, its steps to the desktop's timeline."""
        self.rigs = rigs
        self.oversight = oversight
        self.runs = CodriveRuns(rigs.pipeline, audit, spawn, handoff_timeout=handoff_timeout)
        self.runs.on_step = self._on_step
        rigs.register(CODRIVE_TOOLS, self.handle)

    def _on_step(self, seat: str, run: CodriveRun, result: StepResult) -> None:
        for rig in self.rigs.surfaces():
            if rig.id == seat:  # never the typed text: the result holds only its length
                step = f"{run.app} step {result.index}: {result.rung}"
                self.oversight.record(
                    rig, "codrive_run", step, f"{result.effect}: {result.outcome}"
                )

    async def handle(
        self,
        agent: str,
        params: Any,
        cfg: ComputerUseConfig,
        events: CallEvents,
        conversation: str = "",
    ) -> Answer:
        if isinstance(params, CodriveStatusParams):
            return self.status(agent, params.run_id)
        assert isinstance(params, CodriveRunParams)
        return await self.run(agent, params, cfg, events, conversation)

    async def run(
        self,
        agent: str,
        params: CodriveRunParams,
        cfg: ComputerUseConfig,
        events: CallEvents,
        conversation: str = "",
    ) -> Answer:
        """A run on the conversation's desktop rig (started if needed): answers when it
        ends, when it waits for a person, or after 30 s with it still going (SPEC S3;
        codrive_status follows it)."""
        async with self.rigs.holding(agent, "desktop", cfg, events, conversation) as rig:
            assert isinstance(rig, DesktopRig)
            going = self.runs.status(agent, None)
            if going is not None and not going.done.is_set():
                raise SessionRefused(
                    f"run {going.id} is still going on your desktop; follow it with "
                    "codrive_status, or wait for it to end"
                )
            steps = len(params.steps)
            if rig.clock.used + steps > rig.clock.max_actions:
                raise SessionRefused(
                    f"this run has {steps} steps and your desktop has "
                    f"{rig.clock.max_actions - rig.clock.used} actions left of "
                    f"{rig.clock.max_actions}; close it with rig_close to start afresh"
                )
            await self.rigs.follow(rig, cfg)
            for _ in range(steps):
                rig.clock.spend(self.rigs.clock())
            opened = await rig.channel.request("app", APP_DEADLINE, app=params.target_app)
            if opened.get("started"):
                await events.progress("codrive", f"started {params.target_app}")
        rules = StepRules(rig.deny_list, tuple(cfg.confirm_words), tuple(cfg.confirm_urls))
        run = await self.runs.start(
            agent, params, RigDesktop(rig, params.target_app), rules, events
        )
        return run_answer(run)

    def status(self, agent: str, run_id: str | None) -> Answer:
        run = self.runs.status(agent, run_id)
        if run is None:
            which = f"run {run_id}" if run_id else "codrive run"
            return answer(
                text_block(f"You have no {which} (runs are kept for a while)."),
                is_error=run_id is not None,
                **NO_RUN,
            )
        return run_answer(run)


def run_answer(run: CodriveRun) -> Answer:
    """The run's summary; text read by api actions goes in an untrusted-data fence."""
    text = run.summary()
    for result in run.results:
        if result.value is not None:
            text += "\n" + fence(result.value, f"what step {result.index} read")
    return answer(text_block(text), is_error=run.state == "failed", **run.public())
