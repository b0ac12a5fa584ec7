"""How a rig's death reaches its agent: at the next call, whichever way it was found.

The gateway finds a dead rig either at the agent's next call (the pipeline's `alive`
stage: that call answers an error saying the rig ended, and the call after it starts a
new rig) or first, between two calls (the expiry loop looks every second: the next call
then starts a new rig and its answer begins with why the old one ended). Both are the
product's promise, told once; which one a test sees depends on timing, so it accepts
either and checks each fully."""

from __future__ import annotations

import mcp_types as types

from tests.e2e.test_computer_use import text_of


def told_the_rig_ended(answer: types.CallToolResult, why: str, tool: str) -> bool:
    """Assert `answer` tells the agent its rig ended and `why`; True when this call found
    it (an error: the next call starts a new rig), False when it had been found before
    (this call already started the new rig and did its work)."""
    text = text_of(answer)
    assert "ended: its channel failed" in text and why in text, text
    if answer.is_error:
        assert f"the next {tool} call starts a new one" in text, text
        return True
    assert "this call started a new one" in text, text
    return False
