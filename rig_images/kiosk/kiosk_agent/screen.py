"""The X screen as the agent sees it: the PNG grab, top-level windows, keyboard focus."""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from PIL import Image, ImageDraw, ImageGrab
from Xlib import X
from Xlib import error as xerror

from sandboxes.png import encode_image

from .common import log
from .damage import Damage


def pixels_digest(image: Image.Image) -> str:
    """What the screen's pixels are, in 64 hex digits (SHA-256: a page cannot craft a screen
    that passes for another, which would keep a change out of the recording).

    `hashlib` is imported here, at a recording's first frame, not with the module: it loads
    OpenSSL, ~0.6 MiB that a kiosk holds only once it is recorded (a warm pool's members
    never are; issue 23 item 7). Not CPython's own SHA-256 instead: 15 ms a 1280x800 frame
    against OpenSSL's 3 (measured in the image), and a recording takes a frame after each
    of an agent's pauses."""
    import hashlib

    return hashlib.sha256(image.tobytes()).hexdigest()


class Screen:
    """One Xlib display's root window, `width` x `height` pixels."""

    def __init__(self, d: Any, width: int, height: int, *, verbose: bool = False) -> None:
        self.d = d
        self.root: Any = d.screen().root
        self.width = width
        self.height = height
        self.verbose = verbose
        self.damage = Damage(d)
        self._last_grab: weakref.ref[Image.Image] | None = None  # not kept alive here
        self._clean: str | None = None  # the last grab's digest, while nothing is drawn

    def unchanged(self, req: dict[str, Any]) -> dict[str, Any] | None:
        """A recording frame's `same` answer (no probe, no PNG) when the request asks with
        `digest` and `unless` and the screen's pixels are still `unless`'s, else None: the
        kiosk's and the desktop's screenshot ops alike. Known without a grab when `unless`
        is the digest of this screen's last grab and the X server drew nothing since
        (damage.py; the answer's `by` is "damage"), else the screen is grabbed and hashed
        ("pixels")."""
        unless = req.get("unless") if req.get("digest") is True else None
        if not isinstance(unless, str):
            return None
        if unless == self._clean and not self.damage.drawn():
            return {"same": True, "digest": unless, "by": "damage"}
        if self.digest(self.grab()) == unless:
            return {"same": True, "digest": unless, "by": "pixels"}
        return None

    def digest_asked(self, req: dict[str, Any], image: Image.Image) -> dict[str, str]:
        """A screenshot answer's `digest` field, when the request asked for it (a recording's
        frame: `digest: true`), else nothing."""
        return {"digest": self.digest(image)} if req.get("digest") is True else {}

    def digest(self, image: Image.Image) -> str:
        """`pixels_digest(image)`; kept as the screen's while nothing is drawn when `image`
        is the last grab."""
        digest = pixels_digest(image)
        if self._last_grab is not None and image is self._last_grab():
            self._clean = digest
        return digest

    def grab(self) -> Image.Image:
        """The whole screen, now: Pillow's own grab (XCB, in C, on a connection of its
        own), the same pixels as python-xlib's `get_image` without parsing the 4 MB reply
        in Python (a 1280x800 screenshot paced as an agent acts: about 3 ms less of the
        kiosk's CPU, the grab 9.3-12.0 -> 7.6-9.0 ms; docs/benchmarks.md, issue 23). The
        damage is cleared first, so what is drawn after it is known (`unchanged`)."""
        self._clean = None  # an earlier digest no longer stands for the screen
        self.damage.clear()
        image = ImageGrab.grab(xdisplay=self.d.get_display_name())
        if image.size != (self.width, self.height):  # the screen is the session's size
            image = image.crop((0, 0, self.width, self.height))
        self._last_grab = weakref.ref(image)
        return image

    def encode_png(self, img: Image.Image, black: Sequence[Sequence[int]] = ()) -> bytes:
        """`img` as a PNG, with each `black` rectangle (x, y, w, h) painted black before it
        is encoded (so no pixel of it ever leaves this process)."""
        t1 = time.perf_counter()
        if black:
            img = img.copy()  # the caller's grab stays as it was taken
            draw = ImageDraw.Draw(img)
            for x, y, w, h in black:
                draw.rectangle((x, y, x + w - 1, y + h - 1), fill=(0, 0, 0))
        png = encode_image(img)  # sandboxes/png.py, shared with the gateway
        if self.verbose:
            log(f"png {1000 * (time.perf_counter() - t1):.1f} ms")
        return png

    def _top_levels(self) -> Iterator[tuple[Any, Any]]:
        """(window, geometry) of each viewable, non-override-redirect top-level window
        bigger than 1x1; windows destroyed meanwhile are skipped."""
        for win in self.root.query_tree().children:
            try:
                attrs = win.get_attributes()
                if attrs.map_state != X.IsViewable or attrs.override_redirect:
                    continue
                geo = win.get_geometry()
            except xerror.XError:
                continue
            if geo.width > 1 and geo.height > 1:
                yield win, geo

    def count_windows(self) -> int:
        """Top-level windows (see `_top_levels`) that are at least partly on screen."""
        return sum(
            1
            for _, geo in self._top_levels()
            if geo.x < self.width
            and geo.y < self.height
            and geo.x + geo.width > 0
            and geo.y + geo.height > 0
        )

    def focused_ok(self) -> bool:
        """Whether the focused top-level window can be read (False for any doubt)."""
        try:
            focus = self.d.get_input_focus().focus
            if isinstance(focus, int):  # None (0) or PointerRoot (1): the window under the pointer
                pointer = self.root.query_pointer()
                focus = pointer.child
                if not focus or isinstance(focus, int):
                    return False
            win = focus
            for _ in range(64):  # up to the top-level window
                tree = win.query_tree()
                parent = tree.parent
                if parent is None or isinstance(parent, int) or parent.id == self.root.id:
                    break
                win = tree.parent
            if win.id == self.root.id:
                return False
            attrs = win.get_attributes()
            viewable: bool = attrs.map_state == X.IsViewable
            return viewable
        except Exception:  # unreadable for any reason: the caller masks the whole image
            return False

    def top_level_windows(self) -> list[Any]:
        return [win for win, _ in self._top_levels()]

    def focus_first_window(self, deadline: float) -> None:
        """No window manager: give the first top-level window the keyboard focus ourselves,
        once it is mapped (polled with a deadline), so keys work before any click; size it to
        exactly the screen."""
        while True:
            wins = self.top_level_windows()
            if wins:
                break
            if time.monotonic() > deadline:
                log("no mapped browser window before the deadline; focus left as is")
                return
            time.sleep(0.01)
        win = wins[0]
        geo = win.get_geometry()
        if (geo.x, geo.y, geo.width, geo.height) != (0, 0, self.width, self.height):
            # Chromium sizes its window one pixel short of the screen; no WM will fix it.
            win.configure(x=0, y=0, width=self.width, height=self.height)
        win.set_input_focus(X.RevertToParent, X.CurrentTime)
        self.d.sync()
