"""Whether anything was drawn on the X screen since the last grab: the X DAMAGE extension
on the root window (issue 23: a recording's frame after an input that changed nothing).

A recorder asks for a frame after each of an agent's pauses, and most inputs change no
pixel (a click on a blank spot, a scroll at the end of a page). Grabbing the 1280x800
screen and hashing it to learn that cost the kiosk ~11 ms of CPU a frame, and Xvfb the
copy. The X server reports every drawing into the root window or any window inside it,
whoever drew it (a `DamageNotify` once the damage goes from empty to not empty), so "no
damage since the grab whose digest the recorder holds" is "the same pixels", without the
grab. The X server draws; a page or an application cannot change a pixel and keep it from
the server's own report.

The order that makes it exact (`clear` before each grab, `drawn` before a "same"):
- `clear`: subtract the damage, then a round trip, so the server has emptied it before the
  grab is asked for on Pillow's own connection; whatever it draws from then on is
  reported, and a drawing between the clear and the grab is in the grab as well (only a
  needless grab next time).
- `drawn`: a round trip first, so every report the server made before it is in this
  connection's queue (X delivers a connection's events in order with its replies).

Anything unexpected (no DAMAGE extension, an X error on these requests) turns it off for
good: every frame is then grabbed and hashed, as before. An X error on a request with no
reply comes later, to the connection's error handler, not as an exception: the handler
set here notes one on a DAMAGE request, and `clear` and `drawn` look after their round
trip, by which every earlier error has arrived. Ops run one at a time on the agent's main
thread (serve.py): no lock."""

from __future__ import annotations

from typing import Any

from Xlib.ext import damage

from .common import log


class Damage:
    """The root window's damage, read on the agent's own X connection `d`."""

    def __init__(self, d: Any) -> None:
        self.d = d
        self._id: int | None = None
        self._dirty = True  # nothing known yet: grab
        self._event = -1
        self._major = -1
        self._failed: str | None = None  # an X error on a DAMAGE request, once seen
        try:
            if not d.has_extension(damage.extname):
                log("no X DAMAGE extension: every recording frame is grabbed")
                return
            self._major = d.display.get_extension_major(damage.extname)  # no round trip
            d.set_error_handler(self._on_error)
            d.damage_query_version()  # the server wants the version asked first
            self._event = d.extension_event.DamageNotify
            self._id = d.screen().root.damage_create(damage.DamageReportNonEmpty)
            self._sync()
        except Exception as exc:  # off, not fatal: frames are grabbed as before
            self._off(exc)

    @property
    def on(self) -> bool:
        return self._id is not None

    def clear(self) -> None:
        """Before a grab: empty the damage; once this returns, the server reports what it
        draws next."""
        if self._id is None:
            return
        try:
            self.d.damage_subtract(self._id)
            self._sync()
            self._drain()  # reports made before the subtract: the grab shows what they say
            self._dirty = False
        except Exception as exc:
            self._off(exc)

    def drawn(self) -> bool:
        """Whether the server drew anything since the last `clear` (True when unknown)."""
        if self._id is None:
            return True
        try:
            self._sync()
            if self._drain():
                self._dirty = True
        except Exception as exc:
            self._off(exc)
            return True
        return self._dirty

    def _sync(self) -> None:
        """A round trip; raises when an X error on a DAMAGE request has come meanwhile."""
        self.d.sync()
        if self._failed is not None:
            raise RuntimeError(self._failed)

    def _on_error(self, err: Any, request: Any) -> None:
        """The connection's handler of errors on requests with no reply (python-xlib's own
        default prints them; so does this one)."""
        if getattr(err, "major_opcode", None) == self._major:
            self._failed = f"X error {type(err).__name__} on a DAMAGE request"
        self.d.display.default_error_handler(err)

    def _drain(self) -> bool:
        """Read the queued events; whether one was a damage report. Nothing else in the
        agent reads this connection's events (it selects none it acts on)."""
        seen = False
        while self.d.pending_events():
            if self.d.next_event().type == self._event:
                seen = True
        return seen

    def _off(self, exc: Exception) -> None:
        log(f"X DAMAGE off ({type(exc).__name__}: {exc}): every recording frame is grabbed")
        self._id = None
        self._dirty = True
