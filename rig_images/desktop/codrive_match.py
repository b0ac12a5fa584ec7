"""codrive's matching rule: which element of an application's AT-SPI tree a step names
(exact, case-insensitive, then fuzzy), whether an element is on screen, and the one walk
of a tree's showing elements (codrive's lookups; the screenshot's password walk is
desktop_mask.py: it fails closed where this one skips)."""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable
from typing import Any, TypeVar

SLOW_CALL_S = 0.5  # an unanswered AT-SPI read, not a node gone meanwhile
_T = TypeVar("_T")

# What the fuzzy rung reads as the same character (a model writes x for a times sign).
GLYPHS = str.maketrans(
    {"\u00d7": "*", "\u00f7": "/", "\u2212": "-", "\u2013": "-", "\u2026": "", "\u232b": "<-"}
)


def norm(text: str) -> str:
    """The fuzzy rule's form of a name: NFKC, case-folded, operator glyphs read as their
    ASCII forms, "..." dropped, whitespace collapsed, a name that repeats itself read once."""
    text = unicodedata.normalize("NFKC", text).translate(GLYPHS).casefold()
    words = text.replace("...", "").split()
    half = len(words) // 2
    if half and len(words) % 2 == 0 and words[:half] == words[half:]:
        words = words[:half]  # GTK4 names a button by its label twice: "7 7"
    return " ".join(words)


def role_matches(wanted: str, role: str) -> bool:
    """A role matches itself and its kinds: "button" matches "push button" and "toggle
    button", "menu item" matches "check menu item" and "radio menu item"."""
    wanted, role = wanted.casefold().strip(), role.casefold()
    return not wanted or role == wanted or role.endswith(" " + wanted)


def pick(wanted: str, named: list[tuple[str, Any]]) -> tuple[Any | None, str]:
    """The element whose name matches, and how (or None and why not): exact, then
    case-insensitive, then fuzzy (the normalized name equals or starts with the normalized
    wanted name). More than one match at the first level that has any is ambiguous."""
    levels = (
        ("exact", lambda n: n == wanted),
        ("case-insensitive", lambda n: n.casefold().strip() == wanted.casefold().strip()),
        ("fuzzy", lambda n: norm(n) == norm(wanted) or norm(n).startswith(norm(wanted))),
    )
    for how, test in levels:
        hits = [node for name, node in named if name and test(name)]
        if len(hits) == 1:
            return hits[0], how
        if len(hits) > 1:
            return None, f"ambiguous: {len(hits)} elements match ({how})"
    return None, "not found"


def on_screen(A: Any, node: Any) -> bool:
    try:
        box = node.get_extents(A.CoordType.SCREEN)
    except Exception:  # the element went away
        return False
    return bool(box.width > 0 and box.height > 0 and box.x > -10000 and box.y > -10000)


def showing_nodes(A: Any, root: Any, keep: Callable[[Any], bool], limit: int = 4000) -> list[Any]:
    """Descendants of `root` that `keep` accepts, from a walk that skips subtrees neither
    showing nor visible (`showing_children`: the first 500 children of each); at most
    `limit` nodes are read, and one that goes away or does not answer meanwhile is
    skipped: a lookup finds what it can read (the screenshot's mask fails closed instead:
    desktop_mask.py)."""
    out: list[Any] = []
    stack = [root]
    seen = 0
    while stack and seen < limit:
        node = stack.pop()
        try:
            if node is not root:
                seen += 1
                if keep(node):
                    out.append(node)
            children, _ = showing_children(A, node)
        except Exception:  # a node that went away or stopped answering meanwhile
            continue
        stack.extend(reversed(children))
    return out


class Unanswered(Exception):
    """An application did not answer an AT-SPI read (not a node gone meanwhile)."""


def showing_children(A: Any, node: Any, most: int = 500) -> tuple[list[Any], int]:
    """`node`'s children that are showing or visible (GTK4 leaves SHOWING off some
    containers: a closed menu or a hidden page is pruned, a container without the flag is
    not), of its first `most`, and how many children it has. A child gone meanwhile is
    skipped: its read fails at once. libatspi does not raise when a call goes unanswered
    (a child count of -1, an empty state set, after its wait): that raises Unanswered."""
    count, slow = _timed(node.get_child_count)
    if count < 0:
        if slow:
            raise Unanswered("an application did not answer")
        return [], 0  # the node went away meanwhile: nothing of it is on screen
    out = []
    for i in range(min(count, most)):
        child = node.get_child_at_index(i)
        if child is None:
            continue
        try:
            states, slow = _timed(child.get_state_set)
        except Exception:  # the child went away meanwhile
            continue
        if slow and not states.get_states():
            raise Unanswered("an application did not answer")
        if states.contains(A.StateType.SHOWING) or states.contains(A.StateType.VISIBLE):
            out.append(child)
    return out, count


def _timed(call: Callable[[], _T]) -> tuple[_T, bool]:
    """`call()`'s answer, and whether it took as long as an unanswered call does (libatspi
    waits >= 1 s on the agent's AT-SPI thread; a read of a live node takes milliseconds)."""
    began = time.monotonic()
    answer = call()
    return answer, time.monotonic() - began >= SLOW_CALL_S
