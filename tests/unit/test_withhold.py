"""Secret values withheld from text an agent reads (sandboxes.withhold)."""

from __future__ import annotations

import json

from sandboxes.withhold import WITHHELD, withhold


def test_withhold_replaces_every_spelling_of_a_value() -> None:
    text = '- textbox "Password" [ref=e3]: hunter2\n- textbox "Q": "a\\"b: c"\nhunter2 again'
    out, count = withhold(text, ["hunter2", 'a"b: c'])

    assert "hunter2" not in out and 'a\\"b' not in out
    assert out.count(WITHHELD) == 3 and count == 3


def test_withhold_finds_a_value_as_a_browser_quotes_it_whole_or_squashed() -> None:
    """corral's own snapshot quotes with the browser's JSON.stringify: non-ASCII as it is,
    quotes and line breaks escaped; a name has its white space squashed."""
    value = 'pässwörd "1"\nline  two'
    browser = json.dumps(value, ensure_ascii=False)  # what JSON.stringify writes
    squashed = json.dumps(" ".join(value.split()), ensure_ascii=False)
    text = f"- textbox [ref=e1]: {browser}\n- button {squashed} [ref=e2]"
    out, count = withhold(text, [value])

    assert "pässwörd" not in out and count == 2, out
