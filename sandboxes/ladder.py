"""codrive's ladder (SPEC S3.2), pure: one step tries api_action, then locate, then x/y.

The probes that touch the desktop are injected (`DesktopProbes`): the registry's api
actions, the AT-SPI lookup, pointer and keyboard input, and a fingerprint of the
application's accessibility tree and the screen for the effect check. The result says
which rung acted, why each earlier rung fell through, and whether anything changed;
"no visible effect" is reported, never hidden.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from sandboxes.codrive import Step

Rung = Literal["api_action", "locate", "xy", "none"]
Effect = Literal["changed", "no_visible_effect", "confirmed"]


@dataclass(frozen=True, slots=True)
class ApiAction:
    """One registered action: its params schema, and the probe that runs it. The probe
    returns True when the application confirmed the effect itself, False when it did not,
    or the text it read (a read is confirmed; the text is returned as untrusted data)."""

    schema: type[BaseModel]
    run: Callable[[BaseModel], Awaitable[bool | str]]
    summary: str = ""


Registry = Mapping[str, Mapping[str, ApiAction]]  # target_app -> action name -> action


@dataclass(frozen=True, slots=True)
class Located:
    """Where `(role, name)` is, in screen pixels, or why it was not found."""

    center: tuple[int, int] | None
    how: str  # "exact", "case-insensitive", "fuzzy: ...", or why not
    role: str | None = None  # the element's own role and name, as the tree reads them
    name: str | None = None


class DesktopProbes(Protocol):
    async def locate(self, app: str, role: str, name: str) -> Located: ...

    async def pointer(self, step: Step, x: int, y: int) -> None: ...

    async def keyboard(self, step: Step) -> None: ...

    async def fingerprint(self, app: str) -> str: ...

    async def settle(self, app: str, before: str) -> bool:
        """Whether the app changed from `before` (waiting briefly for it to repaint)."""
        ...

    async def pause(self, seconds: int) -> None: ...


@dataclass
class StepResult:
    index: int
    rung: Rung
    fell_through: list[str] = field(default_factory=list)
    effect: Effect = "no_visible_effect"
    outcome: str = ""
    value: str | None = None  # what a reading api action read (untrusted)
    at: tuple[int, int] | None = None  # where the pointer acted, in screen pixels
    retried: bool = False  # a person's input dropped it once; this is the second try

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "rung": self.rung,
            "fell_through": list(self.fell_through),
            "effect": self.effect,
            "outcome": self.outcome,
        }
        if self.at is not None:
            out["at"] = list(self.at)
        if self.value is not None:
            out["value"] = self.value
        if self.retried:
            out["retried"] = True
        return out


def _params_problem(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "params"
    return f"params.{where}: {first['msg']}"


async def _try_api(step: Step, app: str, registry: Registry) -> tuple[bool | str, str]:
    """(confirmed or the text read, why it fell through when it did not act)."""
    assert step.api_action is not None
    actions = registry.get(app, {})
    action = actions.get(step.api_action)
    if action is None:
        known = ", ".join(sorted(actions)) or "none"
        return False, f"api_action {step.api_action!r} is not registered for {app} ({known})"
    try:
        params = action.schema.model_validate(step.params or {})
    except ValidationError as exc:
        return False, f"api_action {step.api_action}: {_params_problem(exc)}"
    try:
        confirmed = await action.run(params)
    except Exception as exc:
        return False, f"api_action {step.api_action} failed: {exc}"[:300]
    if confirmed is False:
        return False, f"api_action {step.api_action} did not confirm"
    return confirmed, ""


async def run_step(
    index: int, step: Step, app: str, probes: DesktopProbes, registry: Registry
) -> StepResult:
    """Run one approved, non-credential step down the ladder."""
    if step.action == "wait":
        await probes.pause(step.amount or 1)
        return StepResult(index, "none", outcome=f"waited {step.amount} s")
    before = await probes.fingerprint(app)
    result = StepResult(index, "none")
    acted = False
    if step.api_action is not None:
        confirmed, why = await _try_api(step, app, registry)
        if confirmed is not False:
            result.rung, result.effect = "api_action", "confirmed"
            result.outcome = f"{step.api_action} done"
            if isinstance(confirmed, str):
                result.value, result.outcome = (
                    confirmed,
                    f"{step.api_action} read {len(confirmed)} characters",
                )
            return result
        result.fell_through.append(why)
    if step.action in ("type", "key"):
        if step.x is not None and step.y is not None:
            await probes.pointer(step.model_copy(update={"action": "click"}), step.x, step.y)
            result.rung = "xy"
        await probes.keyboard(step)
        acted = True
        result.outcome = (
            f"typed {len(step.text or '')} characters" if step.action == "type" else "pressed a key"
        )
    else:
        if step.role is not None and step.name is not None:
            found = await probes.locate(app, step.role, step.name)
            if found.center is not None:
                await probes.pointer(step, *found.center)
                result.rung, acted, result.at = "locate", True, found.center
                result.outcome = f"{step.action} on {step.role} {step.name!r} ({found.how})"
            else:
                result.fell_through.append(f"locate {step.role} {step.name!r}: {found.how}")
        if not acted and step.x is not None and step.y is not None:
            await probes.pointer(step, step.x, step.y)
            result.rung, acted, result.at = "xy", True, (step.x, step.y)
            result.outcome = f"{step.action} at {step.x},{step.y}"
    if not acted:
        result.outcome = "no rung could act: " + "; ".join(result.fell_through)
        return result
    result.effect = "changed" if await probes.settle(app, before) else "no_visible_effect"
    return result
