"""codrive's readings of an application's accessibility tree (mixed into Codrive): an
element by role and name (`locate`, with the element's own role and name, on which the
gateway judges its rules, never the model's words), whether the focused element is a
secret field (`focused`), a widget's text (`read`). What a click at x,y or a key meets is
read as the desktop's `computer_use` reads it (`desktop_target.py`: `target`,
`focus_target`)."""

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
