"""corral's own browser snapshot: how other renderers' frames are spliced in and which
session a ref belongs to (orchestrator.surfaces.browser.aria; the snapshot itself runs in
a real rig's Chromium in tests/e2e/test_browser_use.py)."""

from __future__ import annotations

import json

from orchestrator.surfaces.browser.aria import FRAME_MARK, prefix_of, splice


def test_a_frame_is_spliced_in_at_its_placeholder_with_its_own_frames() -> None:
    text = f'- form [ref=e1]:\n  - iframe [ref=e2]:\n    {FRAME_MARK}e2\n- text: "after"'
    parts = {
        "e2": f'- button "Pay" [ref=f1e1]\n- iframe [ref=f1e2]:\n  {FRAME_MARK}f1e2',
        "f1e2": '- textbox "Card" [ref=f2e1]: "x"',
    }

    assert splice(text, parts).split("\n") == [
        "- form [ref=e1]:",
        "  - iframe [ref=e2]:",
        '    - button "Pay" [ref=f1e1]',
        "    - iframe [ref=f1e2]:",
        '      - textbox "Card" [ref=f2e1]: "x"',
        '- text: "after"',
    ]


def test_a_frame_not_read_is_said_so_and_only_a_whole_placeholder_line_counts() -> None:
    quoted = json.dumps(f"{FRAME_MARK}e1")  # a page's text holding the mark is escaped
    text = f"  {FRAME_MARK}e9\n- text: {quoted}\n- text: x {FRAME_MARK}e1"

    out = splice(text, {"e1": "- button [ref=f1e1]"}).split("\n")

    assert out == [
        '  - text: "(this frame could not be read)"',
        f"- text: {quoted}",
        f"- text: x {FRAME_MARK}e1",
    ]
    assert "\0" not in quoted


def test_frames_that_show_each_other_stop_at_the_depth_limit() -> None:
    parts = {"e1": f"{FRAME_MARK}e1"}  # a frame whose part shows itself again

    out = splice(f"{FRAME_MARK}e1", parts)

    assert out == '- text: "(this frame could not be read)"'  # and no RecursionError


def test_a_refs_prefix_names_its_frames_session() -> None:
    assert prefix_of("e12") == ""
    assert prefix_of("f3e7") == "f3"
    assert prefix_of("f12e1") == "f12"
