"""Secret values withheld from text an agent reads (sandboxes.withhold)."""

from __future__ import annotations

from sandboxes.withhold import WITHHELD, withhold


def test_withhold_replaces_every_spelling_of_a_value() -> None:
    text = '- textbox "Password" [ref=e3]: hunter2\n- textbox "Q": "a\\"b: c"\nhunter2 again'
    out, count = withhold(text, ["hunter2", 'a"b: c'])

    assert "hunter2" not in out and 'a\\"b' not in out
    assert out.count(WITHHELD) == 3 and count == 3
