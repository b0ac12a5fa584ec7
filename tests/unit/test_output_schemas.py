"""Output schemas (issue 25 item 4): every tool lists one, and the answers corral's code
makes validate against their tool's schema. The answers here come from the real code
that makes them (the action pipeline, the answer helpers, the script result, codrive's
run answer); the e2e suite checks the same on the wire, because the official SDK client
validates every non-error result against the listed schema (`ClientSession.call_tool`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from mcp_front.tools import tool as _tool
from orchestrator.codrive.runs import CodriveRun
from orchestrator.codrive.tools import run_answer
from orchestrator.surfaces.answers import Answer, answer, image_answer, text_block
from orchestrator.surfaces.pipeline import Done
from orchestrator.surfaces.rig_driver import rig_list_answer
from sandboxes.catalogue import BY_NAME, CATALOGUE
from sandboxes.events import NO_EVENTS
from sandboxes.ladder import StepResult
from sandboxes.masking import MaskPlan
from sandboxes.results import NO_RUN
from tests.unit.test_approval_binding_surfaces import FakeDriver, action, held, surface_of, world
from tests.unit.test_script_output import BASE

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


def problems(tool: str, structured: Any) -> list[str]:
    validator = Draft202012Validator(_tool(BY_NAME[tool]).output_schema or {})
    return [error.message for error in validator.iter_errors(structured)]


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda spec: spec.name)
def test_every_tool_lists_an_object_output_schema(spec: Any) -> None:
    schema = _tool(spec).output_schema
    assert schema is not None and schema["type"] == "object"
    Draft202012Validator.check_schema(schema)


def test_a_key_no_model_declares_is_invalid() -> None:
    """The control: the schemas are closed, so an answer that grew a field without its
    model fails here rather than in a client."""
    assert problems("rig_close", {"closed": []}) == []
    assert problems("rig_close", {"closed": [], "surprise": 1}) != []
    assert problems("computer_click", {}) != []  # the state is required


class Shooter(FakeDriver):
    """A driver whose every action answers a masked screenshot."""

    async def act(self, surface: Any, action: Any, status: str) -> Done:
        plan = MaskPlan(True, rects=((0, 0, 10, 10),), reason="a password field")
        return Done(image_answer(b"png", plan, status, used=1, max_actions=9))


@pytest.mark.parametrize(
    ("tool", "kind", "driver"),
    [
        ("computer_click", "kiosk", FakeDriver),
        ("computer_screenshot", "kiosk", Shooter),
        ("browser_use", "browser", Shooter),
        ("computer_use", "desktop", FakeDriver),
        ("mobile_use", "android", Shooter),
        ("ios_use", "ios", FakeDriver),
    ],
)
async def test_the_pipelines_answer_carries_the_surfaces_state(
    tmp_path: Path, tool: str, kind: str, driver: type[FakeDriver]
) -> None:
    pipeline, _, _ = world(tmp_path)
    surface = surface_of(kind)

    said = await pipeline.run(surface, action("swipe"), driver({}), NO_EVENTS)

    assert said.structured is not None
    assert problems(tool, dict(said.structured)) == []
    assert said.structured["surface"] == kind and said.structured["surface_id"] == surface.id
    assert said.structured["actions_used"] == 1 and said.structured["approval"] is None


async def test_an_action_run_under_an_approval_names_it(tmp_path: Path) -> None:
    pipeline, queue, _ = world(tmp_path)
    surface = surface_of("android")
    driver = FakeDriver({"name": "delete all"})
    seen: list[str] = []

    async def during(approval: Any) -> None:
        seen.append(approval.id)

    said = await held(pipeline, queue, surface, driver, during)

    assert isinstance(said, Answer) and said.structured is not None
    assert said.structured["approval"] == seen[0]
    assert problems("mobile_use", dict(said.structured)) == []


def test_rig_list_and_rig_close_answers_validate() -> None:
    rigs = {"desktop": surface_of("desktop"), "ios": surface_of("ios")}
    listed = rig_list_answer(rigs, 1.0).structured
    empty = rig_list_answer({}, 1.0).structured

    assert problems("rig_list", listed) == [] and problems("rig_list", empty) == []
    assert problems("rig_close", answer(text_block(""), closed=["r1"]).structured) == []


def test_the_devices_answer_validates_as_mobile_use() -> None:
    rows = [{"device": "emulator-5554", "state": "device", "held_by": None}]
    assert problems("mobile_use", {"devices": rows}) == []
    assert problems("mobile_use", {"devices": [{"device": "x"}]}) != []


def test_the_script_result_validates() -> None:
    result = dataclasses.replace(BASE, exit_code=None, timed_out=True)  # killed: null code
    assert problems("execute_program", result.structured()) == []


def test_codrive_answers_validate() -> None:
    run = CodriveRun("c1", "alice", "gedit", (), False, state="finished", current_step=1)
    run.results.append(StepResult(0, "api_action", effect="changed", outcome="ok", value="hi"))
    run.results.append(StepResult(1, "xy", ["locate: not found"], at=(3, 4), retried=True))
    said: Answer = run_answer(run)

    assert problems("codrive_run", said.structured) == []
    assert problems("codrive_status", answer(text_block("none"), **NO_RUN).structured) == []


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda spec: spec.name)
def test_every_input_schema_states_its_ranges_as_json_schema(spec: Any) -> None:
    """A range is `minimum`/`maximum`, which clients check, not pydantic's own `ge`/`le`
    (written for an integer behind a validator): a client sees 1-20 as a client can."""
    schema = _tool(spec).input_schema
    Draft202012Validator.check_schema(schema)
    text = json.dumps(schema)
    assert not any(f'"{bound}": ' in text for bound in ("ge", "le", "gt", "lt")), text


def test_a_client_checks_a_range_from_the_listed_schema() -> None:
    scroll = Draft202012Validator(_tool(BY_NAME["computer_scroll"]).input_schema)
    assert scroll.is_valid({"x": 1, "y": 1, "amount": 20})
    assert not scroll.is_valid({"x": 1, "y": 1, "amount": 21})
