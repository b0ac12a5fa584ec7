"""codrive's readings of an application's accessibility tree (mixed into Codrive): an
element by role and name (`locate`), the element under a point (`element_at`), the
focused element and whether it is a secret field (`focused`), a widget's text (`read`).
The gateway judges its rules on these (sandboxes/codrive_rules.py), never on the model's
words."""

from __future__ import annotations

from typing import Any

from codrive_match import role_matches, showing_nodes
from kiosk_agent.atspi import Atspi
from kiosk_agent.common import OpError

ATSPI_S = 3.0


class ElementReads:
    """Mixed into Codrive, whose AT-SPI plumbing (`_mod`, `_app`, `_find`, `at`) and tab
    (`focused_secret`) it reads through."""

    desktop: Any
    at: Atspi

    def op_locate(self, req: dict[str, Any]) -> dict[str, Any]:
        self.desktop._require()
        app, role, name = str(req["app"]), str(req["role"]), str(req["name"])

        def run() -> dict[str, Any]:
            node, how = self._find(app, role, name)
            if node is None:
                return {"center": None, "how": how}
            A = self.at._atspi()
            box = node.get_extents(A.CoordType.SCREEN)
            return {
                "center": [box.x + box.width // 2, box.y + box.height // 2],
                "how": how,
                "name": str(node.get_name() or ""),  # the element's own, not the step's
                "role": str(node.get_role_name() or ""),
            }

        return self.at.run(run, ATSPI_S)

    def op_focused(self, req: dict[str, Any]) -> dict[str, Any]:
        """The app's focused element as AT-SPI reads it (role, name) and whether it is a
        secret field: a password text, or in Chromium (read through its DevTools pipe) a
        password, autocomplete-secret or CSS-masked input. `secret` None: cannot say."""
        self.desktop._require()
        app = str(req["app"])

        def run() -> dict[str, Any]:
            A = self._mod()
            focused = showing_nodes(
                A, self._app(A, app), lambda n: n.get_state_set().contains(A.StateType.FOCUSED)
            )
            if not focused:
                return {"role": None, "name": None, "secret": None}
            node = focused[-1]
            role = str(node.get_role_name() or "")
            return {
                "role": role,
                "name": str(node.get_name() or ""),
                "secret": role == "password text",
                "multi_line": node.get_state_set().contains(A.StateType.MULTI_LINE),
            }

        found = self.at.run(run, ATSPI_S)
        if app == "chromium" and not found["secret"]:
            web = self.focused_secret()
            found["secret"] = True if web else (found["secret"] if web is None else False)
        return found

    def op_element_at(self, req: dict[str, Any]) -> dict[str, Any]:
        """The element of `app` under the screen point (x, y), by AT-SPI's hit test from
        the window that contains it, down to the deepest element; an unnamed one (a
        button's inner label box) is named by its nearest named ancestor."""
        self.desktop._require()
        app, x, y = str(req["app"]), int(req["x"]), int(req["y"])

        def run() -> dict[str, Any]:
            A = self._mod()
            node = self._window_at(A, app, x, y)
            if node is None:
                return {"role": None, "name": None, "why": f"no window of {app} at {x},{y}"}
            for _ in range(64):
                child = node.get_accessible_at_point(x, y, A.CoordType.SCREEN)
                if child is None or child == node:
                    break
                node = child
            named = node
            for _ in range(6):
                parent = named.get_parent()
                if named.get_name() or parent is None:
                    break
                named = parent
            return {"role": str(node.get_role_name() or ""), "name": str(named.get_name() or "")}

        return self.at.run(run, ATSPI_S)

    def _window_at(self, A: Any, app: str, x: int, y: int) -> Any | None:
        root = self._app(A, app)
        for i in range(root.get_child_count()):
            frame = root.get_child_at_index(i)
            if frame is None or not frame.get_state_set().contains(A.StateType.SHOWING):
                continue
            box = frame.get_extents(A.CoordType.SCREEN)
            if box.x <= x < box.x + box.width and box.y <= y < box.y + box.height:
                return frame
        return None

    def op_read(self, req: dict[str, Any]) -> dict[str, Any]:
        """The text of the first showing element of `role` (and `name`, when given)."""
        self.desktop._require()
        app, role, name = str(req["app"]), str(req["role"]), req.get("name")

        def run() -> dict[str, Any]:
            A = self._mod()
            for node in showing_nodes(
                A, self._app(A, app), lambda n: role_matches(role, n.get_role_name() or "")
            ):
                if name is not None and (node.get_name() or "") != name:
                    continue
                text = node.get_text_iface()
                value = text.get_text(0, -1) if text is not None else node.get_name()
                return {"text": str(value or "")[:4000]}
            raise OpError(f"no showing {role!r}" + (f" named {name!r}" if name else ""))

        return self.at.run(run, ATSPI_S)
