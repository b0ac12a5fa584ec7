"""Secret values withheld from text an agent reads (a page's text or accessibility tree,
a phone's UI dump): every spelling of each value replaced by one marker."""

from __future__ import annotations

import json

WITHHELD = "[secret field: value withheld]"


def withhold(text: str, secrets: list[str]) -> tuple[str, int]:
    """`text` with every secret value (as written, and as a JSON or YAML string spells it)
    replaced by `WITHHELD`; how many were replaced. Longest first, so a value inside a
    longer one cannot leave the rest of it behind."""
    spellings: set[str] = set()
    for value in secrets:
        for form in {value, " ".join(value.split())}:
            # JSON as Python writes it (non-ASCII escaped) and as a browser's
            # JSON.stringify does (non-ASCII as it is): corral's own snapshot quotes so
            for quoted in (json.dumps(form), json.dumps(form, ensure_ascii=False)):
                spellings |= {form, quoted, quoted[1:-1]}
    count = 0
    for spelling in sorted((s for s in spellings if s.strip()), key=len, reverse=True):
        count += text.count(spelling)
        text = text.replace(spelling, WITHHELD)
    return text, count
