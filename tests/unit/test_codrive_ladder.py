"""codrive's step shapes (sandboxes/codrive.py) and the ladder (sandboxes/ladder.py), with
the desktop probes injected. The probes here are a recording fake: they stand below the
real desktop rig's tests (issue 11), which drive galculator through the same ladder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from sandboxes.codrive import CodriveRunParams, Step
from sandboxes.errors import ParamError
from sandboxes.ladder import ApiAction, Located, run_step
from sandboxes.params import validate

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


def problems(**run: Any) -> str:
    with pytest.raises(ParamError) as refused:
        validate(CodriveRunParams, {"target_app": "galculator", **run})
    return str(refused.value)


@pytest.mark.parametrize(
    ("step", "says"),
    [
        ({}, "steps.0.action: required"),
        ({"action": "fly"}, "steps.0.action"),
        ({"action": "type"}, "text: required for action type"),
        ({"action": "click", "x": 5, "y": 5, "text": "a"}, "text: only for action type"),
        ({"action": "click", "role": "button"}, "role and name: give both"),
        ({"action": "click", "x": 5}, "x and y: give both"),
        ({"action": "click"}, "click: needs role + name, x + y or an api_action"),
        ({"action": "type", "text": "pw", "category": "credential"}, "never carries text"),
        ({"action": "key"}, "key_name: required"),
        ({"action": "key", "key_name": "ctrl+alt+Delete"}, "key_name:"),
        ({"action": "scroll", "x": 1, "y": 1}, "direction: required"),
        ({"action": "wait"}, "amount: required for action wait"),
        ({"action": "wait", "amount": 31}, "steps.0.amount: must be from 1 to 30"),
        ({"action": "type", "text": "a", "role": "button", "name": "x"}, "locate is not valid"),
        ({"action": "click", "x": 5000, "y": 1}, "steps.0.x: must be from 0 to 4096"),
        ({"action": "click", "x": 1, "y": 1, "params": {}}, "params: only with api_action"),
        ({"action": "click", "x": 1, "y": 1, "category": "maybe"}, "steps.0.category"),
        ({"action": "take_over", "x": 1, "y": 1}, "take_over: takes no x/y"),
    ],
)
def test_every_bad_step_is_refused_naming_its_index_and_field(
    step: dict[str, Any], says: str
) -> None:
    assert says in problems(steps=[step])


def test_run_shape_limits() -> None:
    assert "steps: must be from 1 to 50" in problems(steps=[{"action": "wait", "amount": 1}] * 51)
    assert "steps: must be from 1 to 50" in problems(steps=[])
    with pytest.raises(ParamError, match="one of: mousepad, galculator"):
        validate(CodriveRunParams, {"target_app": "excel", "steps": [{"action": "take_over"}]})


def test_a_credential_step_without_text_and_a_take_over_need_a_person() -> None:
    assert Step(action="type", category="credential").needs_person
    assert Step(action="take_over").needs_person
    assert Step(action="click", x=1, y=1, category="purchase").consequential


@dataclass
class Desktop:
    """Records what the ladder asked of the desktop; its tree changes when told to."""

    where: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    changes: bool = True
    calls: list[str] = field(default_factory=list)
    version: int = 0

    async def locate(self, app: str, role: str, name: str) -> Located:
        center = self.where.get((role, name))
        return Located(center, "exact" if center else "no such element in the tree")

    async def pointer(self, step: Step, x: int, y: int) -> None:
        self.calls.append(f"{step.action} {x},{y}")
        self.version += self.changes

    async def keyboard(self, step: Step) -> None:
        self.calls.append(f"{step.action}")
        self.version += self.changes

    async def fingerprint(self, app: str) -> str:
        return str(self.version)

    async def settle(self, app: str, before: str) -> bool:
        return str(self.version) != before

    async def pause(self, seconds: int) -> None:
        self.calls.append(f"pause {seconds}")


class Url(BaseModel):
    url: str


def registry(result: bool | Exception) -> dict[str, dict[str, ApiAction]]:
    async def run(params: BaseModel) -> bool:
        if isinstance(result, Exception):
            raise result
        return result

    return {"chromium": {"open_url": ApiAction(Url, run)}}


async def test_api_action_acts_first_and_confirms() -> None:
    desk = Desktop()
    step = Step(action="click", x=1, y=1, api_action="open_url", params={"url": "https://x"})
    result = await run_step(0, step, "chromium", desk, registry(True))
    assert (result.rung, result.effect, result.fell_through) == ("api_action", "confirmed", [])
    assert desk.calls == []


@pytest.mark.parametrize(
    ("step", "api", "why"),
    [
        (Step(action="click", x=1, y=1, api_action="nope"), True, "not registered"),
        (Step(action="click", x=1, y=1, api_action="open_url", params={}), True, "params.url"),
        (
            Step(action="click", x=1, y=1, api_action="open_url", params={"url": "u"}),
            RuntimeError("CDP gone"),
            "failed: CDP gone",
        ),
    ],
)
async def test_a_failing_api_action_falls_through_and_says_why(
    step: Step, api: bool | Exception, why: str
) -> None:
    desk = Desktop()
    result = await run_step(2, step, "chromium", desk, registry(api))
    assert result.rung == "xy" and why in result.fell_through[0]
    assert desk.calls == ["click 1,1"] and result.effect == "changed"


async def test_locate_acts_before_xy_and_falls_through_when_not_found() -> None:
    desk = Desktop(where={("push button", "7"): (40, 50)})
    found = await run_step(
        0, Step(action="click", role="push button", name="7", x=1, y=1), "galculator", desk, {}
    )
    assert found.rung == "locate" and desk.calls == ["click 40,50"]
    missing = await run_step(
        1, Step(action="click", role="push button", name="9", x=1, y=1), "galculator", desk, {}
    )
    assert missing.rung == "xy" and "no such element" in missing.fell_through[0]


async def test_no_visible_effect_is_reported_and_nothing_acting_is_said() -> None:
    desk = Desktop(changes=False)
    quiet = await run_step(0, Step(action="click", x=3, y=4), "galculator", desk, {})
    assert quiet.effect == "no_visible_effect"
    stuck = await run_step(
        1, Step(action="click", role="button", name="gone"), "galculator", desk, {}
    )
    assert stuck.rung == "none" and "no rung could act" in stuck.outcome


async def test_typing_never_shows_the_text_in_the_result() -> None:
    result = await run_step(0, Step(action="type", text="hello"), "mousepad", Desktop(), {})
    assert result.outcome == "typed 5 characters" and "hello" not in str(result.public())
