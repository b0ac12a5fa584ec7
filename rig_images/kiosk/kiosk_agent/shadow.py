"""Secret inputs inside closed shadow roots, which no JavaScript world can reach: read
through CDP's DOM domain (the browser's view of the tree, closed roots included, and
the nodes whose computed -webkit-text-security draws discs), for the probe and for
every frame it reads. Which
fields are secret, and the CDP steps that find them, are `sandboxes.secret_fields` (the
one probe, shared with the gateway's browser rig and carried into this image); this
module drives those steps over the kiosk's own CDP pipe."""

from __future__ import annotations

from typing import Any

from sandboxes import secret_fields as sf

from .cdp import CDP, CDPError
from .common import step_s


def _sender(cdp: CDP, sid: str) -> Any:
    def send(call: sf.Call) -> dict[str, Any]:
        try:
            return cdp.call(call.method, call.params, session=sid, timeout=step_s())
        except CDPError as exc:
            raise sf.CallFailed(str(exc)) from exc

    return send


def closed_shadow_css(cdp: CDP, sid: str) -> list[list[float]]:
    """Secret inputs inside closed shadow roots of a session's frames (its own renderer's
    frames, cross-origin ones included), from CDP's DOM domain (the browser's view of the
    tree, closed roots included), in the session's root-frame CSS pixels, unclipped.
    A failure to tell is an error (the whole image is masked)."""
    send = _sender(cdp, sid)
    try:
        found = sf.run_blocking(sf.find_secret("", closed_only=True), send)
        return sf.run_blocking(sf.boxes(found), send)
    except sf.ProbeError as exc:
        raise CDPError(str(exc)) from exc
