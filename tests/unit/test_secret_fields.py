"""The one secret-field probe (sandboxes/secret_fields.py), pure: which nodes of a pierced
DOM tree are secret, the CDP steps driven by a scripted CDP, and values withheld. The
same module runs in the kiosk image (carried by its build context) and in the gateway."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.backends.docker.images import recipe_files, rig_dockerfile
from sandboxes import secret_fields as sf

pytestmark = pytest.mark.unit


def el(node_id: int, name: str, *attrs: str, **more: Any) -> dict[str, Any]:
    return {"nodeId": node_id, "backendNodeId": 100 + node_id, "nodeName": name,
            "attributes": list(attrs), **more}  # fmt: skip


# A document: a plain input, a password, a card number, a closed shadow root holding a
# password and a plain input (CSS-masked, below), and a frame with a one-time code.
DOC = el(
    1,
    "#document",
    children=[
        el(2, "INPUT", "id", "name"),
        el(3, "INPUT", "TYPE", "Password"),
        el(4, "INPUT", "autocomplete", "billing CC-Number"),
        el(5, "DIV", shadowRoots=[
            {**el(6, "#document-fragment"), "shadowRootType": "closed",
             "children": [el(7, "INPUT", "type", "password"), el(8, "INPUT")]},
        ]),
        el(9, "IFRAME", frameId="F2", contentDocument=el(10, "#document", children=[
            el(11, "INPUT", "autocomplete", "one-time-code"),
            el(12, "DIV", "contenteditable", ""),
        ])),
    ],
)  # fmt: skip


def scripted(styles: dict[int, str], failing: set[int] = frozenset()) -> Any:  # type: ignore[assignment]
    calls: list[sf.Call] = []

    def send(call: sf.Call) -> dict[str, Any]:
        calls.append(call)
        if call.method == "DOM.getDocument":
            assert call.params == {"depth": -1, "pierce": True}
            return {"root": DOC}
        if call.method == "DOM.getNodesForSubtreeByStyle":
            assert call.params["nodeId"] == 1 and call.params["pierce"] is True
            asked = {(s["name"], s["value"]) for s in call.params["computedStyles"]}
            drawn = [n for n, value in styles.items() if (sf.TEXT_SECURITY, value) in asked]
            return {"nodeIds": drawn}
        if call.method == "DOM.getBoxModel":
            if call.params["nodeId"] in failing:
                raise sf.CallFailed("Could not compute box model.")
            n = call.params["nodeId"]
            return {"model": {"border": [n, 10, n + 5, 10, n + 5, 20, n, 20]}}
        return {}

    return send, calls


def test_secret_by_attributes_style_and_place_in_every_root_and_frame() -> None:
    send, calls = scripted({8: "disc"})
    found = sf.run_blocking(sf.find_secret("F1", closed_only=False), send)

    assert [(f.node_id, f.frame_id) for f in found] == [
        (3, "F1"), (4, "F1"), (7, "F1"), (8, "F1"), (11, "F2")
    ]  # fmt: skip
    # One style query for the whole pierced tree, not one per field.
    assert [c.method for c in calls] == [
        "DOM.enable", "DOM.getDocument", "DOM.getNodesForSubtreeByStyle"
    ]  # fmt: skip


def test_the_kiosk_walk_takes_closed_roots_only_and_an_unrendered_field_has_no_box() -> None:
    send, _ = scripted({8: "circle"}, failing={7})
    found = sf.run_blocking(sf.find_secret("", closed_only=True), send)
    assert [f.node_id for f in found] == [7, 8]

    assert sf.run_blocking(sf.boxes(found), send) == [[8, 10, 5, 10]]


def test_a_call_that_fails_outside_a_box_fails_the_probe() -> None:
    def send(call: sf.Call) -> dict[str, Any]:
        raise sf.CallFailed("Target closed")

    with pytest.raises(sf.CallFailed, match="Target closed"):
        sf.run_blocking(sf.find_secret("", closed_only=True), send)


def test_too_many_fields_is_an_error_not_a_partial_answer() -> None:
    many = el(1, "#document", children=[el(i, "INPUT") for i in range(2, sf.MAX_FIELDS + 3)])
    with pytest.raises(sf.ProbeError, match="more than"):
        sf.fields(many, "F", closed_only=False)


@pytest.mark.anyio
async def test_values_are_read_in_an_isolated_world_per_frame() -> None:
    fields = (sf.Field(3, 103, "F1", True), sf.Field(11, 111, "F2", True))
    calls: list[sf.Call] = []

    async def send(call: sf.Call) -> dict[str, Any]:
        calls.append(call)
        if call.method == "Page.createIsolatedWorld":
            return {"executionContextId": {"F1": 7, "F2": 8}[call.params["frameId"]]}
        if call.method == "DOM.resolveNode":
            return {"object": {"objectId": f"o{call.params['backendNodeId']}"}}
        texts = {"o103": ["hunter2"], "o111": ["", "424242"]}
        assert call.params["objectId"] == call.params["arguments"][0]["objectId"]
        return {
            "result": {"value": [t for a in call.params["arguments"] for t in texts[a["objectId"]]]}
        }

    assert await sf.run_async(sf.values(fields), send) == ["hunter2", "424242"]
    resolved = [c.params for c in calls if c.method == "DOM.resolveNode"]
    assert resolved == [
        {"backendNodeId": 103, "executionContextId": 7, "objectGroup": sf.OBJECT_GROUP},
        {"backendNodeId": 111, "executionContextId": 8, "objectGroup": sf.OBJECT_GROUP},
    ]


def test_the_kiosk_and_desktop_contexts_carry_the_probe_module_itself() -> None:
    source = (rig_dockerfile("kiosk").parents[2] / "sandboxes" / "secret_fields.py").read_bytes()
    for rig in ("kiosk", "desktop"):
        files = recipe_files(rig_dockerfile(rig))
        assert files["sandboxes/secret_fields.py"] == source
        assert "COPY sandboxes/secret_fields.py" in files["Dockerfile"].decode()


@pytest.mark.anyio
async def test_a_batch_has_every_call_in_flight_at_once_and_keeps_their_order() -> None:
    """The box models are asked together: no answer comes until every call was sent (a
    runner sending them one by one would never finish), and a failed one is skipped."""
    import anyio

    found = tuple(sf.Field(n, 100 + n, "F", True) for n in (2, 3, 4))
    sent: list[int] = []
    all_sent = anyio.Event()

    async def send(call: sf.Call) -> dict[str, Any]:
        sent.append(call.params["nodeId"])
        if len(sent) == len(found):
            all_sent.set()
        await all_sent.wait()
        if call.params["nodeId"] == 3:
            raise sf.CallFailed("Could not compute box model.")
        n = call.params["nodeId"]
        return {"model": {"border": [n, 10, n + 5, 10, n + 5, 20, n, 20]}}

    with anyio.fail_after(5):
        rects = await sf.run_async(sf.boxes(found), send)
    assert rects == [[2, 10, 5, 10], [4, 10, 5, 10]]


def test_a_failed_call_in_a_values_batch_fails_the_probe() -> None:
    """A secret field whose value cannot be read is not skipped: the probe fails, and the
    caller withholds all text."""
    fields = (sf.Field(3, 103, "F1", True), sf.Field(4, 104, "F1", True))

    def send(call: sf.Call) -> dict[str, Any]:
        if call.method == "Page.createIsolatedWorld":
            return {"executionContextId": 7}
        if call.method == "DOM.resolveNode" and call.params["backendNodeId"] == 104:
            raise sf.CallFailed("No node with given id found")
        return {"object": {"objectId": "o"}, "result": {"value": ["x"]}}

    with pytest.raises(sf.CallFailed, match="No node"):
        sf.run_blocking(sf.values(fields), send)


@pytest.mark.anyio
async def test_kept_handles_are_used_again_and_only_new_fields_are_resolved() -> None:
    calls: list[str] = []

    async def send(call: sf.Call) -> dict[str, Any]:
        calls.append(call.method)
        if call.method == "Page.createIsolatedWorld":
            return {"executionContextId": 7}
        if call.method == "DOM.resolveNode":
            return {"object": {"objectId": f"o{call.params['backendNodeId']}"}}
        return {"result": {"value": [a["objectId"] for a in call.params["arguments"]]}}

    kept = sf.Handles()
    one, two = sf.Field(3, 103, "F1", True), sf.Field(4, 104, "F1", True)
    assert await sf.run_async(sf.values((one,), kept), send) == ["o103"]
    calls.clear()
    assert await sf.run_async(sf.values((one, two), kept), send) == ["o103", "o104"]
    assert calls == ["DOM.resolveNode", "Runtime.callFunctionOn"]  # one read per frame
    assert kept.worlds == {"F1": 7} and set(kept.objects) == {103, 104}
