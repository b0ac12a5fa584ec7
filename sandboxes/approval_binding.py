"""An approval is for one exact action (issue 22 item 1), pure.

What an operator approves is a `Binding`: the tool, its parameters, the surface and the
target as the surface's driver read it when the rule held the action (a kiosk click's
element at x,y: role, name, text, link URL; a key's focused element and a text field's
submit control; a browser_use verb's element with its box and the page's URL). Its
`digest` is the sha256 of its canonical JSON (keys sorted, no spaces, UTF-8), so two
bindings are the same action exactly when their digests are equal.

After the approval, the pipeline reads the target again and binds the action anew;
`changed` says whether what would be done now is not what was approved. The parameters
are bound whole (the text typed included); what the console and the CLI show of them
(`shown_params`) leaves the typed text out, as the audit and the timeline do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TARGET_CHANGED = "the target changed since it was approved"
PENDING = "an approval is pending"
SECRET_PARAMS = frozenset({"text"})  # bound, never shown: what is typed or filled


def canonical(value: Any) -> bytes:
    """One JSON text for one value: sorted keys, no spaces, UTF-8 (not ASCII-escaped);
    anything JSON has no type for is written as its str()."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    ).encode()


@dataclass(frozen=True, slots=True)
class Binding:
    """One exact action: what an approval is for."""

    tool: str
    params: Mapping[str, Any]  # JSON-shaped (a pydantic model's dump)
    surface: str  # the surface's id
    target: Mapping[str, Any] | None  # as the driver read it; None: it reads nothing

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "params": dict(self.params),
            "surface": self.surface,
            "target": None if self.target is None else dict(self.target),
        }

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical(self.as_json())).hexdigest()


def changed(approved_digest: str, now: Binding | None) -> bool:
    """Whether the action that would be done now (None: no rule holds it any more, so it
    is not the element that was approved) differs from the approved one."""
    return now is None or now.digest != approved_digest


def shown_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters as an operator sees them: typed text as its length only."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in SECRET_PARAMS and isinstance(value, str):
            out[key] = f"({len(value)} characters, not shown)"
        else:
            out[key] = value
    return out


def pending_refusal(step: str, approval_id: str) -> str:
    """The answer to input on a surface whose approval is pending."""
    return (
        f"Refused: {PENDING} on this surface ({approval_id}: {step}). No other input is "
        "taken until an operator decides it; screenshots still work."
    )


def target_changed_refusal(approval_id: str) -> str:
    return (
        f"Refused: {TARGET_CHANGED} ({approval_id}); the operator approved another element "
        "than the one there now. Nothing was done; take a screenshot and ask again."
    )
