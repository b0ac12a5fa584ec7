"""A walk of the secret-field probe kept between probes (sandboxes.kept_walk): which DOM
events stale it, and how it is asked again."""

from __future__ import annotations

from typing import Any

import pytest

from sandboxes import kept_walk as kw
from sandboxes import secret_fields as sf
from tests.unit.test_secret_fields import el, scripted

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("event", "params", "expected"),
    [
        ("DOM.childNodeInserted", {"parentNodeId": 1, "node": el(40, "INPUT")}, True),
        ("DOM.childNodeRemoved", {"parentNodeId": 1, "nodeId": 2}, True),
        ("DOM.documentUpdated", {}, True),
        ("DOM.shadowRootPushed", {"hostId": 5, "root": {"nodeId": 41}}, True),
        ("DOM.attributeModified", {"nodeId": 2, "name": "TYPE", "value": "password"}, True),
        ("DOM.attributeModified", {"nodeId": 2, "name": "autocomplete", "value": "x"}, True),
        ("DOM.attributeRemoved", {"nodeId": 12, "name": "contenteditable"}, True),
        # What cannot change a field, its attributes or its frame:
        ("DOM.attributeModified", {"nodeId": 2, "name": "style", "value": "left: 3px"}, False),
        ("DOM.attributeModified", {"nodeId": 2, "name": "class", "value": "masked"}, False),
        ("DOM.characterDataModified", {"nodeId": 4}, False),
    ],
)  # fmt: skip
def test_what_stales_a_walk(event: str, params: dict[str, Any], expected: bool) -> None:
    assert kw.stales(event, params, set()) is expected


def test_changes_inside_the_browsers_own_shadow_roots_do_not_stale_a_walk() -> None:
    """An input's value changes its inner editor (a shadow root the browser made): the
    walk does not read it, so it stays; the nodes added there are not read either."""
    editor = {**el(50, "#document-fragment"), "shadowRootType": "user-agent",
              "children": [el(51, "DIV", children=[el(52, "#text")])]}  # fmt: skip
    doc = el(1, "#document", children=[el(2, "INPUT", shadowRoots=[editor])])
    browsers: list[sf.Node] = []
    assert [f.node_id for f in sf.fields(doc, "F", False, browsers)] == [2]
    unread = kw.node_ids(browsers)
    assert unread == {50, 51, 52}

    typed = {"parentNodeId": 51, "node": {**el(53, "SPAN"), "children": [el(54, "#text")]}}
    assert kw.stales("DOM.childNodeInserted", typed, unread) is False
    assert {53, 54} <= unread
    assert kw.stales("DOM.childNodeRemoved", {"parentNodeId": 53, "nodeId": 54}, unread) is False
    lazily = {"hostId": 2, "root": {**el(60, "#document-fragment"), "shadowRootType": "user-agent"}}
    assert kw.stales("DOM.shadowRootPushed", lazily, unread) is False and 60 in unread
    # The page's own nodes still stale it.
    assert kw.stales("DOM.childNodeInserted", {"parentNodeId": 1, "node": el(70, "P")}, unread)


def test_a_kept_walk_asks_only_its_style_and_frames_again_after_checking_its_root() -> None:
    send, calls = scripted({8: "disc"})
    walked = sf.run_blocking(sf.walk(None, closed_only=False), _with_tree(send))
    assert (walked.root, walked.root_backend, walked.frame_id, walked.frames) == (1, 101, "F1", 2)
    calls.clear()

    found, frames = sf.run_blocking(kw.styled_again(walked), _with_tree(send, same=True))
    assert [f.node_id for f in found] == [3, 4, 7, 8, 11] and frames == 2
    assert [c.method for c in calls] == [
        "DOM.describeNode", "Page.getFrameTree", "DOM.getNodesForSubtreeByStyle"
    ]  # fmt: skip


def test_a_kept_walk_of_a_document_replaced_or_unknown_is_gone() -> None:
    send, _ = scripted({})
    walked = sf.run_blocking(sf.walk(None, closed_only=False), _with_tree(send))
    for same in (False, None):  # another document's root; a node id the renderer lacks
        with pytest.raises(kw.WalkGone):
            sf.run_blocking(kw.styled_again(walked), _with_tree(send, same=same))


def test_a_walk_of_attribute_secrets_only_asks_no_style() -> None:
    walked = sf.Walk(1, 101, "F", (sf.Field(3, 103, "F", True),), 1)
    assert sf.run_blocking(sf.styled(walked), lambda call: pytest.fail(str(call))) == walked.fields
    calls: list[str] = []

    def send(call: sf.Call) -> dict[str, Any]:
        calls.append(call.method)
        if call.method == "DOM.describeNode":
            return {"node": {"backendNodeId": 101}}
        return {"frameTree": {"frame": {"id": "F"}}}

    assert sf.run_blocking(kw.styled_again(walked), send) == (walked.fields, 1)
    assert calls == ["DOM.describeNode", "Page.getFrameTree"]


def _with_tree(send: Any, same: bool | None = True) -> Any:
    """`send` answering the frame tree (F1 with child F2) and describeNode: the walked
    root (`same`), another document's root (False), or an unknown node id (None)."""

    def answer(call: sf.Call) -> dict[str, Any]:
        if call.method == "Page.getFrameTree":
            send(call)
            return {"frameTree": {"frame": {"id": "F1"}, "childFrames": [{"frame": {"id": "F2"}}]}}
        if call.method == "DOM.describeNode":
            send(call)
            if same is None:
                raise sf.CallFailed("Could not find node with given id")
            return {"node": {"backendNodeId": 101 if same else 999}}
        return send(call)  # type: ignore[no-any-return]

    return answer
