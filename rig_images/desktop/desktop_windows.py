"""What X shows on the desktop rig, window by window, and which process each belongs to:
what the screenshot's mask (desktop_mask.py) checks against the applications AT-SPI
knows, and what desktop_target.py reads a window's application by.

A window is shown when it is viewable (it and every ancestor mapped): openbox's managed
clients (`_NET_CLIENT_LIST`), and any other window at the root that openbox did not make
(an application's pop-up, a menu, a window not yet managed). A window names its process
in `_NET_WM_PID` (GTK and Chromium set it on their top-levels and their pop-ups);
openbox's own windows (its frames, corral's launcher menu, its check window) are known by
their X client (`wm_owns`). Measured on this image: a Mousepad started without the
accessibility bridge shows a window of its own process that AT-SPI never lists, which the
walk alone read as a screen without password fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from Xlib import X


class Shown(NamedTuple):
    window: Any  # python-xlib's window
    pid: int | None  # None: the window names no process


def window_pid(d: Any, window: Any) -> int | None:
    """The process that says it made `window` (`_NET_WM_PID`), or None."""
    prop = window.get_full_property(d.intern_atom("_NET_WM_PID"), 0)
    return int(prop.value[0]) if prop is not None and len(prop.value) else None


def wm_owns(d: Any, window: Any, wm: int | None = None) -> bool:
    """Whether openbox made this window: its X client (the id's high bits) is the one that
    made the window manager's check window (`wm`, read once by a caller checking many)."""
    wm = _wm_client(d) if wm is None else wm
    return bool(wm >= 0 and (window.id & ~d.display.info.resource_id_mask) == wm)


def _wm_client(d: Any) -> int:
    """The high bits of the window manager's check window's id (-1: no window manager)."""
    prop = d.screen().root.get_full_property(d.intern_atom("_NET_SUPPORTING_WM_CHECK"), 0)
    if prop is None or not len(prop.value):
        return -1
    return int(prop.value[0]) & ~d.display.info.resource_id_mask


def shown_windows(d: Any, clients: list[Any]) -> list[Shown]:
    """Every window the screen may show that is not openbox's own: the viewable managed
    `clients` and the viewable windows at the root on the screen that openbox did not
    make. A window that goes away meanwhile is left out."""
    shown = [Shown(w, _pid_or_none(d, w)) for w in clients if _viewable(w)]
    root, wm = d.screen().root, _wm_client(d)
    size = (d.screen().width_in_pixels, d.screen().height_in_pixels)
    for window in root.query_tree().children:
        if _viewable(window) and _on_screen(window, size) and not wm_owns(d, window, wm):
            shown.append(Shown(window, _pid_or_none(d, window)))
    return shown


def unlisted(shown: list[Shown], pids: set[int], title: Callable[[Any], str]) -> str | None:
    """Why the screen must be masked whole when a shown window's process is not one of the
    applications AT-SPI listed (`pids`): its password fields could not be read. Only that
    window's `title` is read."""
    for window, pid in shown:
        if pid is None:
            return f"a window that names no process is shown ({title(window)!r})"
        if pid not in pids:
            return (
                f"the window {title(window)!r} (process {pid}) is not on the AT-SPI "
                "accessibility bus"
            )
    return None


def _viewable(window: Any) -> bool:
    try:
        return bool(window.get_attributes().map_state == X.IsViewable)
    except Exception:  # the window went away
        return False


def _on_screen(window: Any, size: tuple[int, int]) -> bool:
    try:
        box = window.get_geometry()
    except Exception:  # the window went away
        return False
    inside = box.x < size[0] and box.y < size[1]
    return bool(inside and box.x + box.width > 0 and box.y + box.height > 0)


def _pid_or_none(d: Any, window: Any) -> int | None:
    try:
        return window_pid(d, window)
    except Exception:  # the window went away
        return None
