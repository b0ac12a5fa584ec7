"""Where the desktop rig's screenshot must be masked: every application's showing password
fields, read through AT-SPI on the agent's one AT-SPI thread, within a time budget, and
failing closed.

An application that does not answer AT-SPI is not a screen without password fields.
libatspi does not raise when a call times out: it answers a child count of -1 and empty
names. So a read that goes unanswered (codrive_match.showing_children), or a walk that
runs past its budget or its size, is an error here: the gateway then masks the whole
screen and says why (sandboxes/masking.py), and the rig stays up. Measured on this image:
a just-started Mousepad stopped (SIGSTOP) held the screenshot's walk 15.9 s under
libatspi's default timeouts (an application's first 15 s are exempt), past the gateway's
then 5 s deadline (which ended the rig), and the next screenshots answered "no password field"
in 1.6 s each, unmasked. On the AT-SPI thread (1 s a call, 2 s for a new application) and
within this budget, they answer in time with the whole screen masked.

A window whose application is not on the accessibility bus at all (not yet registered,
or started without the bridge) has no password fields to read either: the walk names
the applications it read (their process ids), and the agent masks the whole screen when
X shows a window of any other process (desktop_windows.py).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from codrive_match import Unanswered, showing_children
from kiosk_agent.atspi import Atspi
from kiosk_agent.common import OpError

WALK_S = 3.0  # both walks of one screenshot, under the gateway's 10 s (DesktopRig)
LIMIT = 5000  # elements read, per application


class Walked(NamedTuple):
    rects: list[list[int]]  # the password fields' rectangles, a 2-pixel margin
    pids: set[int]  # the processes of the applications read
    error: str | None  # set: the whole screen must be masked


def password_rects(at: Atspi, deadline: float) -> Walked:
    """The password fields' rectangles in screen pixels and the applications read, or the
    error that means the whole screen must be masked; waits at most until `deadline`."""
    left = max(0.0, deadline - time.monotonic())  # none left: the walk says so at once
    try:
        rects, pids = at.run(lambda: _walk(at._atspi(), deadline), left + 0.2)
    except OpError as exc:
        return Walked([], set(), str(exc))
    return Walked(rects, pids, None)


def _walk(A: Any, deadline: float) -> tuple[list[list[int]], set[int]]:
    """On the AT-SPI thread; any exception is the screenshot's error (`Atspi.run`)."""
    rects: list[list[int]] = []
    pids: set[int] = set()
    desktop = A.get_desktop(0)
    for i in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(i)
        if app is not None:
            rects += _app_rects(A, app, deadline)
            pids.add(app.get_process_id())
    return rects, pids


def _app_rects(A: Any, app: Any, deadline: float) -> list[list[int]]:
    """One application's password fields; reading more than LIMIT of its elements, or
    past `deadline`, raises Unanswered (what was not read may hold one)."""
    rects: list[list[int]] = []
    stack = [app]
    read = 0
    while stack:
        if time.monotonic() > deadline:
            raise Unanswered(f"the accessibility tree took more than {WALK_S:g} s to read")
        children, count = showing_children(A, stack.pop(), LIMIT - read)
        read += count
        if read > LIMIT:
            raise Unanswered(f"an application shows more than {LIMIT} elements: not all were read")
        for child in children:
            if child.get_role() == A.Role.PASSWORD_TEXT:
                box = child.get_extents(A.CoordType.SCREEN)
                rects.append([box.x - 2, box.y - 2, box.width + 4, box.height + 4])
            stack.append(child)
    return rects
