"""What a browser_use verb acts on: a ref's role and name from the last snapshot."""

from __future__ import annotations

import pytest

from orchestrator.surfaces.browser.acts_on import from_snapshot

pytestmark = pytest.mark.unit

SNAPSHOT = """- generic [active] [ref=e1]:
  - button "Go" [ref=e2]
  - textbox "Amount" [ref=e6]
  - button "Pay \\"now\\"" [cursor=pointer] [ref=e7]
  - generic [ref=e8]
"""


def test_a_refs_role_and_name_come_from_the_snapshot() -> None:
    assert from_snapshot(SNAPSHOT, "e2") == ("button", "Go")
    assert from_snapshot(SNAPSHOT, "e6") == ("textbox", "Amount")
    assert from_snapshot(SNAPSHOT, "e7") == ("button", 'Pay \\"now\\"')
    assert from_snapshot(SNAPSHOT, "e8") == ("generic", "")


def test_a_ref_not_in_the_snapshot_is_unknown() -> None:
    assert from_snapshot(SNAPSHOT, "e9") is None
    assert from_snapshot(SNAPSHOT, "e1") is not None
    assert from_snapshot("", "e2") is None
