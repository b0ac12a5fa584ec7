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
        if call.method == "CSS.getComputedStyleForNode":
            value = styles.get(call.params["nodeId"], "none")
            return {"computedStyle": [{"name": "-webkit-text-security", "value": value}]}
        if call.method == "DOM.getBoxModel":
            if call.params["nodeId"] in failing:
                raise sf.CallFailed("Could not compute box model.")
            n = call.params["nodeId"]
            return {"model": {"border": [n, 10, n + 5, 10, n + 5, 20, n, 20]}}
        return {}

    return send, calls


def test_secret_by_attributes_style_and_place_in_every_root_and_frame() -> None:
    send, calls = scripted({8: "disc"})
    found = sf.run_blocking(sf.find_secret("F1", closed_only=False, css_ready=False), send)

    assert [(f.node_id, f.frame_id) for f in found.fields] == [
        (3, "F1"), (4, "F1"), (7, "F1"), (8, "F1"), (11, "F2")
    ]  # fmt: skip
    assert found.css_ready
    asked = [c.params["nodeId"] for c in calls if c.method == "CSS.getComputedStyleForNode"]
    assert sorted(asked) == [2, 8, 12]  # only fields the attributes do not already tell
    assert [c.method for c in calls].count("CSS.enable") == 1


def test_the_kiosk_walk_takes_closed_roots_only_and_an_unrendered_field_has_no_box() -> None:
    send, calls = scripted({8: "circle"}, failing={7})
    found = sf.run_blocking(sf.find_secret("", closed_only=True, css_ready=True), send)
    assert [f.node_id for f in found.fields] == [7, 8]
    assert "CSS.enable" not in [c.method for c in calls]  # the session had it on already

    assert sf.run_blocking(sf.boxes(found.fields), send) == [[8, 10, 5, 10]]


def test_a_call_that_fails_outside_a_box_fails_the_probe() -> None:
    def send(call: sf.Call) -> dict[str, Any]:
        raise sf.CallFailed("Target closed")

    with pytest.raises(sf.CallFailed, match="Target closed"):
        sf.run_blocking(sf.find_secret("", closed_only=True, css_ready=False), send)


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
        return {"result": {"value": ["hunter2"] if calls[-2].params["backendNodeId"] == 103
                           else ["", "424242"]}}  # fmt: skip

    assert await sf.run_async(sf.values(fields), send) == ["hunter2", "424242"]
    resolved = [c.params for c in calls if c.method == "DOM.resolveNode"]
    assert resolved == [
        {"backendNodeId": 103, "executionContextId": 7},
        {"backendNodeId": 111, "executionContextId": 8},
    ]


def test_withhold_replaces_every_spelling_of_a_value() -> None:
    text = '- textbox "Password" [ref=e3]: hunter2\n- textbox "Q": "a\\"b: c"\nhunter2 again'
    out, count = sf.withhold(text, ["hunter2", 'a"b: c'])

    assert "hunter2" not in out and 'a\\"b' not in out
    assert out.count(sf.WITHHELD) == 3 and count == 3


def test_the_kiosk_and_desktop_contexts_carry_the_probe_module_itself() -> None:
    source = (rig_dockerfile("kiosk").parents[2] / "sandboxes" / "secret_fields.py").read_bytes()
    for rig in ("kiosk", "desktop"):
        files = recipe_files(rig_dockerfile(rig))
        assert files["sandboxes/secret_fields.py"] == source
        assert "COPY sandboxes/secret_fields.py" in files["Dockerfile"].decode()
