"""corral kiosk agent: the one long-lived process inside a kiosk container.

Protocol (docs/kiosk-internals.md section 2): one JSON request per line on
stdin, one JSON response per line on stdout (stdout carries nothing else; logs
go to stderr). Ops: start, screenshot, probe, click, type, key, scroll,
navigate, page, eval, target, vnc.

It owns Xvfb (:99), a session D-Bus (AT-SPI is activated through it), and
Debian's Chromium in kiosk mode, spoken to over CDP on a pipe
(--remote-debugging-pipe: fd 3 = commands in, fd 4 = replies out, JSON
messages terminated by NUL). Input goes through XTest (python-xlib);
screenshots are Pillow's own X grab (XCB). Every X action is flushed and the op
returns at once: callers read effects back by polling, never by sleeping.
x11vnc serves the display on a unix socket for the operators' live view;
`vnc_relay.py`, run by the gateway through `docker exec`, connects to it (and starts
it first when none runs: a kiosk nobody watches runs no x11vnc).

Only Python 3.11's standard library plus Debian's python3-xlib, python3-pil
and (for the AT-SPI password source) python3-gi / gir1.2-atspi-2.0.

Modules, by concern (the X and AT-SPI ones know nothing of Chromium):

- `agent`: the main loop, request dispatch, the ops and the start sequence.
- `xserver`: Xvfb and the session D-Bus.
- `screen`: the PNG grab, top-level windows, keyboard focus.
- `xinput`: XTest clicks, scrolls, keys and typing.
- `atspi`: password fields through AT-SPI, on its own thread.
- `cdp`: the CDP pipe client.
- `browser`: Chromium's launch, its page session, navigation, eval.
- `probe`: what a screenshot must mask (DOM probe, AT-SPI cross-check, windows).
- `frames`: the frames the main probe cannot enter (cross-origin, out-of-process).
- `target`: what a click at a point would hit (name, role, text, link URL).
- `vnc`: x11vnc (live view); `vnc_relay`: its socket to stdin/stdout (run as a file).
- `common`: `OpError`, `log`, shared bounds.

Run it as `python3 /opt/corral/kiosk_agent` or `python3 -m kiosk_agent`.
"""
