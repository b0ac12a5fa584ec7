"""The tool catalogue: the one place each tool is declared.

A `ToolSpec` names the tool, says what it does and what is refused (<= 200
bytes: the description budget, SPEC S5.5), its parameter model, the
capability family that shows it, the action classes it declares (S4.3) and
the `[permissions]` flag that can refuse it while it stays listed (S5.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from sandboxes import params as p
from sandboxes.codrive import CodriveRunParams

DESCRIPTION_BUDGET_BYTES = 200
DOCS = "docs/tools.md"

# Action classes (SPEC S4.3). Read-only mode hides every tool that declares one.
ENCLOSURE_CONTROL = "enclosureControl"
NETWORK_EGRESS = "networkEgress"
PROCESS_SPAWN = "processSpawn"
PACKAGE_INSTALL = "packageInstall"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    params: type[BaseModel]
    capability: str | None  # None: always offered (subject to the other filters)
    action_classes: tuple[str, ...] = ()
    permission: str | None = None  # a [permissions] flag that refuses the call when false
    available: bool = True  # False: declared and gated, executed by a later version

    def input_schema(self) -> dict[str, Any]:
        schema = self.params.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return schema


_CU = "computer_use"
_CU_CLASSES = (ENCLOSURE_CONTROL, NETWORK_EGRESS)

CATALOGUE: tuple[ToolSpec, ...] = (
    ToolSpec(
        "execute_program",
        "Run a python/bash/sh script in a sandbox: no network, read-only root, 2 GiB, "
        "256 processes, 1 CPU. Returns merged output (1 MiB max, cut stated) and exit code.",
        p.ExecuteProgramParams,
        capability=None,
        action_classes=(PROCESS_SPAWN,),
        permission="execute_program",
    ),
    ToolSpec(
        "computer_session_start",
        "Start your kiosk browser session (one per agent). Result lists its limits and the "
        "sites computer_navigate may open.",
        p.SessionStartParams,
        _CU,
        _CU_CLASSES,
    ),
    ToolSpec(
        "computer_screenshot",
        "PNG of your session, with password fields and denied pages masked, then actions "
        "used and time left.",
        p.NoParams,
        _CU,
        _CU_CLASSES,
    ),
    ToolSpec(
        "computer_click",
        "Click at x,y in your session. double only with the left button. Counts one action.",
        p.ClickParams,
        _CU,
        _CU_CLASSES,
    ),
    ToolSpec(
        "computer_type",
        "Type 1-2000 characters into the focused field. Counts one action. Never used for "
        "passwords: ask a human to take over.",
        p.TypeParams,
        _CU,
        _CU_CLASSES,
    ),
    ToolSpec(
        "computer_key",
        "Press an allowed key or chord (Return, Tab, Escape, arrows, ctrl+c; list in "
        "docs/tools.md); others are refused. Counts one action.",
        p.KeyParams,
        _CU,
        _CU_CLASSES,
    ),
    ToolSpec(
        "computer_scroll",
        "Scroll at x,y, up or down, 1-20 steps. Counts one action.",
        p.ScrollParams,
        _CU,
        _CU_CLASSES,
    ),
    ToolSpec(
        "computer_navigate",
        "Open an https URL on an allowed host (port 443, no user info, <= 2000 bytes). Other "
        "URLs are refused. Counts one action.",
        p.NavigateParams,
        _CU,
        _CU_CLASSES,
    ),
    ToolSpec(
        "computer_session_stop",
        "Stop your session and remove its container.",
        p.SessionStopParams,
        _CU,
        (ENCLOSURE_CONTROL,),
    ),
    ToolSpec(
        "codrive_run",
        "Drive one app on the shared desktop, up to 50 steps. Consequential steps wait for "
        f"approval; credentials go to a human. See {DOCS}#codrive_run.",
        CodriveRunParams,
        "codrive",
        (ENCLOSURE_CONTROL, PROCESS_SPAWN),
        available=False,
    ),
    ToolSpec(
        "codrive_status",
        "Status of your codrive run: current step, pending approval, who holds the desktop.",
        p.NoParams,
        "codrive",
        available=False,
    ),
)

BY_NAME: Mapping[str, ToolSpec] = {spec.name: spec for spec in CATALOGUE}

# Descriptions (tool or parameter) allowed over the budget. Each entry must say why; a test
# fails when an entry is no longer needed.
BUDGET_EXEMPTIONS: frozenset[str] = frozenset()


def description_sizes() -> dict[str, int]:
    """UTF-8 byte size of every tool and parameter description, keyed `tool` / `tool.param`."""
    sizes: dict[str, int] = {}
    for spec in CATALOGUE:
        sizes[spec.name] = len(spec.description.encode())
        for name, prop in spec.input_schema().get("properties", {}).items():
            if "description" in prop:
                sizes[f"{spec.name}.{name}"] = len(prop["description"].encode())
    return sizes
