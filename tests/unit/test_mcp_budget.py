"""The tool catalogue and its description budget (SPEC S5.5, S2.1, S3.1, S1.8)."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from sandboxes import catalogue
from sandboxes.catalogue import (
    BUDGET_EXEMPTIONS,
    BY_NAME,
    CATALOGUE,
    DESCRIPTION_BUDGET_BYTES,
    ENCLOSURE_CONTROL,
    NETWORK_EGRESS,
    PROCESS_SPAWN,
    RIG_FLAGS,
    RIG_TOOLS,
    ToolSpec,
    description_sizes,
)
from sandboxes.params import Params
from tests.helpers import COMPUTER_TOOLS

pytestmark = pytest.mark.unit


# ------------------------------------------------------------------ the budget


def test_the_budget_is_200_bytes() -> None:
    assert DESCRIPTION_BUDGET_BYTES == 200


def test_every_tool_and_parameter_description_fits_in_200_bytes_unless_exempt() -> None:
    offenders = {
        key: size
        for key, size in description_sizes().items()
        if size > DESCRIPTION_BUDGET_BYTES and key not in BUDGET_EXEMPTIONS
    }

    assert offenders == {}, (
        f"descriptions over {DESCRIPTION_BUDGET_BYTES} UTF-8 bytes (shorten them and move the "
        f"rationale to docs/, or add an exemption saying why): {offenders}"
    )


def test_every_budget_exemption_is_still_needed() -> None:
    sizes = description_sizes()
    stale = sorted(
        key
        for key in BUDGET_EXEMPTIONS
        if key not in sizes or sizes[key] <= DESCRIPTION_BUDGET_BYTES
    )

    assert stale == [], f"exemptions no longer needed (remove them from BUDGET_EXEMPTIONS): {stale}"


def test_description_sizes_covers_every_tool_and_every_described_parameter() -> None:
    sizes = description_sizes()

    for spec in CATALOGUE:
        assert sizes[spec.name] == len(spec.description.encode("utf-8"))
        for name, prop in spec.input_schema()["properties"].items():
            if "description" in prop:
                assert sizes[f"{spec.name}.{name}"] == len(prop["description"].encode("utf-8"))
    assert sizes["execute_program.timeout_seconds"] > 0
    assert sizes["computer_session_start.width"] > 0


class _WideParams(Params):
    # 50 characters, 150 UTF-8 bytes (each "€" is 3 bytes).
    note: Annotated[str, Field(description="€" * 50)] = ""


def test_description_sizes_counts_utf8_bytes_not_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 74 characters, 212 bytes: under the budget in characters, over it in bytes.
    wide = ToolSpec("wide_tool", "é" * 10 + "€" * 64, _WideParams, capability=None)
    monkeypatch.setattr(catalogue, "CATALOGUE", (wide,))

    sizes = description_sizes()

    assert sizes == {"wide_tool": 10 * 2 + 64 * 3, "wide_tool.note": 150}
    assert len(wide.description) <= DESCRIPTION_BUDGET_BYTES < sizes["wide_tool"]


# ------------------------------------------------------------------ the catalogue


@pytest.mark.parametrize("spec", CATALOGUE, ids=lambda spec: spec.name)
def test_every_tool_has_a_description_and_an_object_input_schema(spec: ToolSpec) -> None:
    assert spec.description.strip()
    schema = spec.input_schema()
    assert schema["type"] == "object"
    assert isinstance(schema["properties"], dict)
    assert schema.get("additionalProperties") is False
    assert "title" not in schema
    for prop in schema["properties"].values():
        assert "title" not in prop


def test_no_two_tools_share_a_name() -> None:
    names = [spec.name for spec in CATALOGUE]

    assert len(names) == len(set(names))
    assert set(BY_NAME) == set(names)
    assert all(BY_NAME[spec.name] is spec for spec in CATALOGUE)


def test_the_computer_tools_are_exactly_the_eight_of_s2_1_gated_by_computer_use() -> None:
    computer = {
        spec.name
        for spec in CATALOGUE
        if spec.name.startswith("computer_") and spec.name != "computer_use"  # the desktop rig
    }

    assert computer == COMPUTER_TOOLS
    assert {spec.name for spec in CATALOGUE if spec.capability == "computer_use"} == computer


def test_the_codrive_tools_are_codrive_run_and_codrive_status_gated_by_codrive() -> None:
    codrive = {spec.name for spec in CATALOGUE if spec.name.startswith("codrive_")}

    assert codrive == {"codrive_run", "codrive_status"}
    assert {spec.name for spec in CATALOGUE if spec.capability == "codrive"} == codrive


def test_execute_program_is_always_offered_and_refusable_by_its_permission_flag() -> None:
    spec = BY_NAME["execute_program"]

    assert spec.capability is None
    assert spec.permission == "execute_program"
    assert set(spec.input_schema()["required"]) == {"code"}


def test_the_catalogue_holds_execute_program_the_computer_codrive_and_recording_tools() -> None:
    assert set(BY_NAME) == COMPUTER_TOOLS | RIG_TOOLS | {
        "execute_program",
        "codrive_run",
        "codrive_status",
        "recording_list",
        "recording_get",
    }


def test_only_execute_program_has_no_capability_family() -> None:
    assert [spec.name for spec in CATALOGUE if spec.capability is None] == ["execute_program"]


def test_only_the_tools_that_read_what_is_declare_no_action_class() -> None:
    assert [spec.name for spec in CATALOGUE if not spec.action_classes] == [
        "rig_list",
        "codrive_status",
        "recording_list",
        "recording_get",
    ]


def test_the_rig_tools_declare_the_action_classes_of_s4_3() -> None:
    driving = {ENCLOSURE_CONTROL, NETWORK_EGRESS, PROCESS_SPAWN}

    assert set(BY_NAME["browser_use"].action_classes) == driving
    assert set(BY_NAME["computer_use"].action_classes) == driving
    assert BY_NAME["rig_close"].action_classes == (ENCLOSURE_CONTROL,)
    assert BY_NAME["rig_list"].action_classes == ()


def test_the_rig_flags_gate_the_rig_tools_as_s4_1a_says() -> None:
    assert BY_NAME["browser_use"].capabilities == ("browser_use",)
    assert BY_NAME["computer_use"].capabilities == ("desktop_use",)
    for name in ("rig_list", "rig_close"):
        assert set(BY_NAME[name].capabilities) == set(RIG_FLAGS)
