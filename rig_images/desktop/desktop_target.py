"""What a click or a key on the desktop acts on, for corral's approval rules (issue 22
item 2): the desktop agent's `target` and `focus_target` ops, answered as the kiosk's
`target` and `focused` are (`{name, role, text, href, error}`, and `submit` for the
focus), read through AT-SPI. codrive's rules read what a step meets through these same
ops (orchestrator/codrive/desktop.py); codrive's own `focused` only says whether the
focused field is a secret one.

- `target` (x, y): the window there is X's own answer (XTranslateCoordinates from the
  root finds the topmost mapped window at the point; below an openbox frame, the client
  window), matched to its application in AT-SPI by process id and title; then the
  deepest accessible at the point (Component hit tests, else the showing child whose box
  holds it), and from there up the nearest element that acts (a button, link, menu item,
  anything offering press/click/activate). A pop-up (a menu) is read the same way from
  its application's one showing non-frame accessible that holds the point (by the
  pop-up's process id); openbox's own windows (corral's launcher menu, window frames)
  activate nothing the rules cover; any other pop-up is unknown, which the rules hold.
- `focus_target`: the active window's focused element; for a text field, its form's first
  button (a web form), or the window's default button (GTK), as `submit`.

Everything runs on the one AT-SPI thread (libatspi is not thread-safe), bounded below
the gateway's 3 s deadline; what cannot be read answers `error`.
"""

from __future__ import annotations

import time
from typing import Any

from desktop_windows import window_pid, wm_owns
from kiosk_agent.atspi import Atspi
from kiosk_agent.common import OpError

READ_S = 2.5
MOST_CHILDREN = 2000  # of one element: a read of more fails (unknown: the rules hold)
# When the read in progress must end (one AT-SPI thread: one read at a time): a walk
# past it stops, so the thread is free for the next read rather than stuck on this one.
_DEADLINE = [float("inf")]
MAX_DEPTH = 64
MAX_TEXT = 500
INTERACTIVE_ROLES = frozenset(
    {
        "push button",
        "toggle button",
        "link",
        "menu item",
        "check menu item",
        "radio menu item",
        "check box",
        "radio button",
        "page tab",
        "combo box",
        "switch",
    }
)
ACTING = ("press", "click", "activate", "jump")
TEXT_FIELDS = frozenset({"entry", "text", "password text", "spin button", "combo box"})
BUTTONS = frozenset({"push button", "toggle button"})
MENU_ITEMS = frozenset({"menu item", "check menu item", "radio menu item", "tearoff menu item"})


def unknown(error: str) -> dict[str, Any]:
    return {"name": None, "role": None, "text": None, "href": None, "error": error}


class Targets:
    def __init__(self, desktop: Any, at: Atspi) -> None:
        self.desktop = desktop  # the agent's Desktop: its X display
        self.at = at  # codrive's AT-SPI thread, shared (one thread for libatspi)

    # ------------------------------------------------------------------ X: which window
    def _client_at(self, x: int, y: int) -> Any | None:
        """The managed client window whose area is topmost at (x, y), or None (the
        desktop itself, or a window no one manages: a pop-up)."""
        d = self.desktop.d
        root = d.screen().root
        clients = {w.id for w in self.desktop._client_windows()}
        window = root
        for _ in range(16):
            child = window.translate_coords(root, x, y).child
            if not child:
                return None
            if child.id in clients:
                return child
            window = child
        return None

    def _active(self) -> Any | None:
        d = self.desktop.d
        prop = d.screen().root.get_full_property(d.intern_atom("_NET_ACTIVE_WINDOW"), 0)
        wid = int(prop.value[0]) if prop is not None and len(prop.value) else 0
        return d.create_resource_object("window", wid) if wid else None

    # ------------------------------------------------------------------ AT-SPI: the frame
    def _frame(self, A: Any, window: Any, point: tuple[int, int] | None) -> Any:
        """The AT-SPI frame of an X client window: its application's process id, its
        title, and (for a point) a box that holds the point."""
        pid, title = window_pid(self.desktop.d, window), self.desktop._title(window)
        desktop = A.get_desktop(0)
        frames = []
        for i in range(desktop.get_child_count()):
            app = desktop.get_child_at_index(i)
            if app is None or (pid is not None and app.get_process_id() != pid):
                continue
            for j in range(min(app.get_child_count(), 64)):
                frame = app.get_child_at_index(j)
                if frame is None or not frame.get_state_set().contains(A.StateType.SHOWING):
                    continue
                if point is not None and not _holds(A, frame, *point):
                    continue
                frames.append(frame)
        named = [f for f in frames if (f.get_name() or "") == title] or frames
        if len(named) != 1:
            raise LookupError(f"{len(named)} accessible windows match the window {title!r}")
        return named[0]

    # ------------------------------------------------------------------ ops
    def op_target(self, req: dict[str, Any]) -> dict[str, Any]:
        self.desktop._require()
        x, y = int(req["x"]), int(req["y"])
        root = self.desktop.d.screen().root
        top = root.translate_coords(root, x, y).child
        if not top:
            return {"name": "", "role": "desktop", "text": "", "href": None, "error": None}
        window = self._client_at(x, y)
        if window is not None:
            return self._read(lambda A: self._at_point(A, window, x, y))
        if wm_owns(self.desktop.d, top):  # openbox's root menu (corral's launchers) or a frame
            return {"name": "", "role": "window manager", "text": "", "href": None, "error": None}
        return self._read(lambda A: self._in_popup(A, top, x, y))

    def _in_popup(self, A: Any, popup: Any, x: int, y: int) -> dict[str, Any]:
        """A pop-up (a menu, a list) of an application: its one showing top-level
        accessible that is no frame and holds the point, read down from there."""
        pid = window_pid(self.desktop.d, popup)
        if pid is None:
            return unknown("a pop-up window that names no process is at that point")
        desktop = A.get_desktop(0)
        apps = [desktop.get_child_at_index(i) for i in range(desktop.get_child_count())]
        tops = [
            node
            for app in apps
            if app is not None and app.get_process_id() == pid
            for node in (app.get_child_at_index(j) for j in range(min(app.get_child_count(), 64)))
            if node is not None and node.get_state_set().contains(A.StateType.SHOWING)
        ]
        popups = [n for n in tops if n.get_role() != A.Role.FRAME and _holds(A, n, x, y)]
        if len(popups) == 1:  # a list or a menu of its own (a combo box's, a context menu)
            return self._down(A, popups[0], x, y)
        # A menu bar's menu: its items live under the menu, in the window's own tree.
        items = [
            n
            for top in tops
            for n in _walk(A, top)
            if (n.get_role_name() or "") in MENU_ITEMS and _holds(A, n, x, y)
        ]
        if len(popups) == 0 and len(items) == 1:
            return _describe(A, items[0])
        return unknown(f"a pop-up is at that point ({len(popups)} pop-ups, {len(items)} items)")

    def op_focus_target(self, req: dict[str, Any]) -> dict[str, Any]:
        self.desktop._require()
        window = self._active()
        if window is None:
            return unknown("no window is active")
        return self._read(lambda A: self._focus(A, window))

    def _read(self, fn: Any) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            A = self.at._atspi()
            _DEADLINE[0] = time.monotonic() + READ_S
            try:
                return dict(fn(A))
            except Exception as exc:  # a node that went away, a D-Bus error
                return unknown(f"the accessibility tree could not be read ({exc})")

        try:
            return self.at.run(run, READ_S)
        except Exception as exc:
            return unknown(str(exc))

    def _at_point(self, A: Any, window: Any, x: int, y: int) -> dict[str, Any]:
        return self._down(A, self._frame(A, window, (x, y)), x, y)

    def _down(self, A: Any, node: Any, x: int, y: int) -> dict[str, Any]:
        for _ in range(MAX_DEPTH):
            deeper = _child_at(A, node, x, y)
            if deeper is None:
                break
            node = deeper
        return _describe(A, _acting(A, node, x, y))

    def _focus(self, A: Any, window: Any) -> dict[str, Any]:
        frame = self._frame(A, window, None)
        found = _showing_with(A, frame, A.StateType.FOCUSED)
        if found is None:
            return unknown("no focused element in the active window")
        out = _describe(A, found)
        out["submit"] = None
        if (found.get_role_name() or "") in TEXT_FIELDS:
            out["submit"] = _submit(A, frame, found)
        return out


def _holds(A: Any, node: Any, x: int, y: int) -> bool:
    try:
        box = node.get_extents(A.CoordType.SCREEN)
    except Exception:
        return False
    return bool(box.x <= x < box.x + box.width and box.y <= y < box.y + box.height)


def _child_at(A: Any, node: Any, x: int, y: int) -> Any | None:
    """An accessible below `node` at (x, y): the toolkit's own hit test, else the last
    showing descendant in tree order whose box holds the point (drawn last, on top; a
    descendant, not only a child: a GTK notebook's page tab is boxed as its label while
    its page lies elsewhere)."""
    try:
        hit = node.get_accessible_at_point(x, y, A.CoordType.SCREEN)
    except Exception:
        hit = None
    if hit is not None and hit != node and _holds(A, hit, x, y):
        return hit
    found = None
    for below in _walk(A, node, limit=2000)[1:]:
        if _holds(A, below, x, y):
            found = below
    return found


def _acts(node: Any) -> bool:
    if (node.get_role_name() or "") in INTERACTIVE_ROLES:
        return True
    action = node.get_action_iface()
    if action is None:
        return False
    names = {(action.get_action_name(i) or "").casefold() for i in range(action.get_n_actions())}
    return any(n in names for n in ACTING)


def _acting(A: Any, node: Any, x: int, y: int) -> Any:
    """The nearest ancestor-or-self that acts and whose box holds the point (a GTK page
    tab acts, but only on its label), up to the window; else the node itself."""
    current = node
    for _ in range(MAX_DEPTH):
        if current is None or current.get_role() == A.Role.FRAME:
            break
        if _acts(current) and _holds(A, current, x, y):
            return current
        current = current.get_parent()
    return node


def _describe(A: Any, node: Any) -> dict[str, Any]:
    role = node.get_role_name() or ""
    href = None
    if role == "link":
        try:
            link = node.get_hyperlink()
            href = link.get_uri(0) if link is not None else None
        except Exception:
            href = None
    text = "" if role == "password text" else _text(A, node)
    return {"name": node.get_name() or "", "role": role, "text": text, "href": href, "error": None}


def _text(A: Any, node: Any) -> str:
    """The names and text under an element (its label child, a web button's text),
    whitespace collapsed, bounded: more text can only make a rule match more. Not the
    contents of an editable field or a password field."""
    parts: list[str] = []
    pending, seen = [node], 0
    while pending and seen < 200 and sum(len(p) + 1 for p in parts) < MAX_TEXT:
        current = pending.pop()
        seen += 1
        if current is None or (current.get_role_name() or "") == "password text":
            continue
        states = current.get_state_set()
        if current is not node and not states.contains(A.StateType.SHOWING):
            continue  # a closed menu's items are not what a click on its title shows
        # What was typed into a field is no control's label (and is not for approvals).
        editable = states.contains(A.StateType.EDITABLE)
        iface = None if editable else current.get_text_iface()
        value = iface.get_text(0, MAX_TEXT) if iface is not None else ""
        for piece in (current.get_name() if current is not node else "", value):
            if piece and piece.strip():
                parts.append(" ".join(piece.split()))
        count = min(current.get_child_count(), 100)
        pending.extend(current.get_child_at_index(i) for i in range(count - 1, -1, -1))
    return " ".join(parts)[:MAX_TEXT]


def _walk(A: Any, root: Any, limit: int = 4000) -> list[Any]:
    """Showing descendants of `root` in tree order. Bounded, and failing closed: more than
    `limit` of them, an element with more than MOST_CHILDREN children, or a walk past the
    read's deadline raises, as what was not read may be the element asked for (the
    rules hold an unknown)."""
    out: list[Any] = []
    pending = [root]
    while pending:
        if len(out) >= limit:
            raise OpError(f"more than {limit} elements show: not all were read")
        if time.monotonic() > _DEADLINE[0]:
            raise OpError(f"the accessibility tree took more than {READ_S:g} s to read")
        node = pending.pop()
        if node is None:
            continue
        try:
            if node is not root and not node.get_state_set().contains(A.StateType.SHOWING):
                continue
            count = node.get_child_count()
        except Exception:
            continue
        if count > MOST_CHILDREN:
            raise OpError(f"an element has {count} children: not all were read")
        out.append(node)
        pending.extend(node.get_child_at_index(i) for i in range(count - 1, -1, -1))
    return out


def _showing_with(A: Any, root: Any, state: Any) -> Any | None:
    """The deepest (last in tree order) showing element under `root` in `state`."""
    found = None
    for node in _walk(A, root):
        if node is not root and node.get_state_set().contains(state):
            found = node
    return found


def _submit(A: Any, frame: Any, field: Any) -> dict[str, Any] | None:
    """A text field's submit control: its web form's first button (the form itself when
    it has none), else the window's default button (GTK), else None."""
    form = field.get_parent()
    for _ in range(MAX_DEPTH):
        if form is None or form.get_role() == A.Role.FRAME:
            form = None
            break
        if (form.get_role_name() or "") == "form":
            break
        form = form.get_parent()
    if form is not None:
        button = next((n for n in _walk(A, form) if (n.get_role_name() or "") in BUTTONS), None)
        return _describe(A, button if button is not None else form)
    default = _showing_with(A, frame, A.StateType.IS_DEFAULT)
    return _describe(A, default) if default is not None else None
