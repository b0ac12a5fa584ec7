"""One codrive step through the one action pipeline (`orchestrator.surfaces.pipeline`):
codrive's `Driver` for a step of a run on the agent's desktop rig.

- rules: the deny list, on the page the app shows and on a URL the step opens
  (normalised, case-insensitive: `sandboxes.masking.deny_matches`), before the step;
- hold: what the step acts on, read from the desktop and judged by the agent's rules
  (`sandboxes.codrive_rules.step_hold`); its category can add an approval, never remove
  one; the pipeline raises and waits for it, a new one for every try;
- act (under the desktop's lock, the seat checked before each input): the deny list
  again, the ladder (`sandboxes.ladder.run_step`), then the deny list once more on where
  the step led (a redirect, a link, `back`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.errors import DeniedPage
from orchestrator.surfaces.answers import answer, text_block
from orchestrator.surfaces.pipeline import Action, Done
from sandboxes.approval_rules import Hold
from sandboxes.codrive import Step
from sandboxes.codrive_rules import step_hold
from sandboxes.ladder import StepResult, run_step
from sandboxes.masking import deny_matches

if TYPE_CHECKING:
    from orchestrator.codrive.runs import CodriveRun, Desktop


@dataclass(frozen=True, slots=True)
class StepRules:
    """The agent's rules a step is judged by (its computer_use config, read per run)."""

    deny_list: Sequence[str] = ()
    confirm_words: Sequence[str] = ()
    confirm_urls: Sequence[str] = ()


def title_matches(title: str, deny_list: Sequence[str]) -> str | None:
    """A deny-list entry that is not a URL or host and appears in the window title
    (case-insensitive), e.g. "captcha"."""
    low = title.casefold()
    for entry in deny_list:
        bare = entry.strip()
        if bare and "://" not in bare and "." not in bare and bare.casefold() in low:
            return entry
    return None


def step_action(index: int, step: Step) -> Action:
    """The pipeline's view of a step: never its text or its key."""
    return Action(
        tool="codrive_run",
        name="codrive_run",
        params=step,
        counted=False,  # the run spent one action per step when it started
        is_input=step.action != "wait",
        step=f"step {index}: {step.label()}",
        details={"step": index, "action": step.action},
    )


@dataclass(eq=False)
class StepDriver:
    """codrive's driver for one try of one step (a new one for every try)."""

    run: CodriveRun
    index: int
    step: Step
    desktop: Desktop
    rules_of: StepRules
    attempt: int = 1
    result: StepResult | None = None
    held: Hold | None = None
    acting: bool = False  # the try began: under the lock, its seat checked (current_try)

    refused_event = "codrive_step_refused"
    done_event = "codrive_step"
    stop_with = "Close it with rig_close"
    keeps_timeline = False  # the run puts each finished step on the timeline (on_step)

    async def rules(self, surface: Any, action: Action) -> None:
        await self._deny_check("opens")

    async def hold(self, surface: Any, action: Action) -> Hold | None:
        if self.step.action == "wait":
            return None
        rules = self.rules_of
        target = await self.desktop.target(self.step)
        self.held = step_hold(
            self.step, self.run.app, target, rules.confirm_words, rules.confirm_urls
        )
        if self.held is None:
            return None
        self.run.state = "waiting_approval"
        return self.held.on(asdict(target))  # what an approval of it binds

    async def act(self, surface: Any, action: Action, status: str) -> Done:
        self.run.state, self.acting = "running", True
        self.run.current_try = self.attempt  # from here on, a person's input interrupts it
        await self._deny_check("opens")
        desktop = self.desktop
        self.result = await run_step(
            self.index, self.step, self.run.app, desktop.probes, desktop.registry
        )
        await self._deny_check("led to")
        outcome = f"{self.result.effect}: {self.result.outcome}"
        details = {"run": self.run.id, "rung": self.result.rung, "effect": self.result.effect}
        return Done(answer(text_block(outcome)), outcome=outcome, details=details)

    async def _deny_check(self, how: str) -> None:
        deny_list = self.rules_of.deny_list
        if not deny_list:
            return
        target = str((self.step.params or {}).get("url") or "")
        if how == "opens" and target and (entry := deny_matches(target, deny_list)) is not None:
            raise DeniedPage(f"step {self.index} refused: it opens {entry!r} (deny list)")
        title, url = await self.desktop.where(self.run.app)
        entry = (deny_matches(url, deny_list) if url else None) or title_matches(title, deny_list)
        if entry is None:
            return
        if how == "opens":
            raise DeniedPage(f"step {self.index} refused: the app shows {entry!r} (deny list)")
        raise DeniedPage(f"step {self.index} led to {entry!r} (deny list): the run stopped there")
