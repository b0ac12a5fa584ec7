"""A walk of the secret-field probe (`sandboxes.secret_fields.Walk`) kept between probes
(the browser rig's `browser/kept.py`): which DOM events mean it no longer holds, and how
a kept walk is asked again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sandboxes.secret_fields import (
    BROWSERS,
    Batch,
    Call,
    CallFailed,
    Field,
    Node,
    ProbeError,
    Steps,
    Walk,
    count_frames,
    ok,
    secret_of,
    style_call,
)

# The attributes the walk reads (`is_field`, `secret_by_attributes`): a change to another
# attribute leaves the walk's answer as it was.
WALKED_ATTRIBUTES = frozenset({"type", "autocomplete", "contenteditable"})
# DOM events after which a walk no longer holds: the tree's shape, a document, a shadow
# root or a walked attribute changed; unless it happened inside a shadow root the browser
# made (an input's inner editor changes with its value), which the walk does not read.
STALING_EVENTS = (
    "DOM.documentUpdated",
    "DOM.setChildNodes",
    "DOM.childNodeInserted",
    "DOM.childNodeRemoved",
    "DOM.childNodeCountUpdated",
    "DOM.shadowRootPushed",
    "DOM.shadowRootPopped",
    "DOM.distributedNodesUpdated",
    "DOM.attributeModified",
    "DOM.attributeRemoved",
)
# Events that cannot stale a walk (a text changed, a style attribute, a pseudo-element):
# counted, so a busy page stops being kept.
PASSING_EVENTS = (
    "DOM.characterDataModified",
    "DOM.inlineStyleInvalidated",
    "DOM.pseudoElementAdded",
    "DOM.pseudoElementRemoved",
)
# Passing events past which, between two probes, the rig stops keeping a walk, so a busy
# page does not stream events to the gateway.
QUIET_AFTER = 200
# The node an event is about (a parent for the tree's changes), by event.
_SUBJECT = {
    "DOM.setChildNodes": "parentId",
    "DOM.childNodeInserted": "parentNodeId",
    "DOM.childNodeRemoved": "parentNodeId",
    "DOM.childNodeCountUpdated": "nodeId",
    "DOM.shadowRootPopped": "rootId",
    "DOM.attributeModified": "nodeId",
    "DOM.attributeRemoved": "nodeId",
}


def node_ids(roots: Iterable[Node]) -> set[int]:
    """The node ids of `roots` and of everything under them."""
    ids: set[int] = set()
    pending = list(roots)
    while pending:
        node = pending.pop()
        ids.add(int(node.get("nodeId", -1)))
        for key in ("children", "shadowRoots", "pseudoElements"):
            pending += node.get(key) or []
        pending += [node[k] for k in ("contentDocument", "templateContent") if node.get(k)]
    return ids


def stales(event: str, params: dict[str, Any], unread: set[int]) -> bool:
    """Whether a DOM event means a walk taken before it no longer holds. `unread`: the
    ids of the nodes the walk did not read (in the browser's own shadow roots), which
    grows here with the nodes added under them."""
    subject = params.get(_SUBJECT.get(event, ""))
    if subject is not None and int(subject) in unread:
        added = [params["node"]] if event == "DOM.childNodeInserted" else params.get("nodes")
        unread |= node_ids(added or [])
        return False
    root = params.get("root") or {}
    if event == "DOM.shadowRootPushed" and root.get("shadowRootType") == BROWSERS:
        unread |= node_ids([root])
        return False
    if event in ("DOM.attributeModified", "DOM.attributeRemoved"):
        return str(params.get("name", "")).lower() in WALKED_ATTRIBUTES
    return event in STALING_EVENTS


class WalkGone(ProbeError):
    """A kept walk's document is not the session's document now."""


def styled_again(walked: Walk) -> Steps[tuple[tuple[Field, ...], int]]:
    """A kept walk's secret fields now (`styled`), once its root is seen to be the same
    document still (a renderer swapped by a navigation knows none of its node ids), and
    how many frames the session's documents hold now; all asked at once."""
    style = [] if all(one.secret for one in walked.fields) else [style_call(walked)]
    answers = yield Batch(
        (Call("DOM.describeNode", {"nodeId": walked.root}), Call("Page.getFrameTree", {}), *style)
    )
    if isinstance(answers[0], CallFailed) or (
        int(answers[0]["node"].get("backendNodeId", -1)) != walked.root_backend
    ):
        raise WalkGone("the page's document changed")
    frames = count_frames(ok(answers[1])["frameTree"])
    return (secret_of(walked, ok(answers[2])) if style else walked.fields), frames
