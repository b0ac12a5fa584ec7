"""The console's HTML pages: server-rendered shells with every value escaped; the live
parts are drawn by console_static/*.js from /console/api/state (no inline script or
style anywhere: the Content-Security-Policy forbids them)."""

from __future__ import annotations

import datetime
from html import escape
from typing import Any


def _shell(title: str, body: str, *, csrf: str = "", script: str = "", data: str = "") -> str:
    meta = f'<meta name="csrf" content="{escape(csrf)}">' if csrf else ""
    js = (
        f'<script type="module" src="/console/static/{script}"></script>'
        '<script src="/console/static/boot.js" defer></script>'
        if script
        else ""
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} - corral console</title>{meta}"
        '<link rel="stylesheet" href="/console/static/console.css">'
        f"{js}</head><body{data}>{body}</body></html>"
    )


def _header(operator: str, csrf: str) -> str:
    return (
        '<header><a href="/console/" class="brand">corral console</a>'
        '<a href="/console/recordings" id="past">Past sessions</a>'
        f'<span class="who">operator <b id="operator">{escape(operator)}</b></span>'
        '<form method="post" action="/console/logout" class="logout">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        '<button type="submit">Log out</button></form></header>'
    )


def login_page(csrf: str, failed: bool) -> str:
    note = (
        '<p class="error" id="login-error">That token is not an operator\'s.</p>' if failed else ""
    )
    body = (
        '<main class="login"><h1>corral console</h1>'
        "<p>Log in with the token <code>corral operators add NAME</code> printed.</p>"
        f"{note}"
        '<form method="post" action="/console/login">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
        '<label>Operator token <input type="password" name="token" id="token" '
        'autocomplete="off" required></label>'
        '<button type="submit" id="login">Log in</button></form></main>'
    )
    return _shell("Log in", body)


def message_page(title: str, text: str) -> str:
    body = f'<main><h1>{escape(title)}</h1><p>{escape(text)}</p><a href="/console/">Back</a></main>'
    return _shell(title, body)


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts else "-"


def _table(table_id: str, heads: tuple[str, ...], rows: list[str], empty: str) -> str:
    """A list page's table: its heads, its rows, or one row saying it is empty."""
    head = "".join(f"<th>{h}</th>" for h in heads)
    body = "".join(rows) or f'<tr class="empty"><td colspan="{len(heads)}">{empty}</td></tr>'
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


SESSION_HEADS = ("agent", "kind", "started", "actions used / left", "state")


def session_row(s: dict[str, Any]) -> str:
    agent = escape(s["agent"])
    return (
        f'<tr data-agent="{agent}" data-session="{escape(s["session"])}">'
        f'<td><a href="/console/sessions/{agent}">{agent}</a></td>'
        f"<td>{escape(s['kind'])}</td><td>{_when(s['started_at'])}</td>"
        f'<td class="actions">{s["actions_used"]} / {s["actions_left"]}</td>'
        f'<td class="state">{escape(s["state"])}</td></tr>'
    )


def _list_page(
    operator: str, csrf: str, title: str, table: str, *, after: str = "", script: str = ""
) -> str:
    body = f"{_header(operator, csrf)}<main><h1>{title}</h1>{table}{after}</main>"
    return _shell(title, body, csrf=csrf, script=script)


def sessions_page(operator: str, csrf: str, sessions: list[dict[str, Any]]) -> str:
    table = _table(
        "sessions", SESSION_HEADS, [session_row(s) for s in sessions], "No running sessions."
    )
    approvals = '<h2>Pending approvals</h2><div id="approvals" class="approvals"></div>'
    return _list_page(operator, csrf, "Sessions", table, after=approvals, script="sessions.js")


def session_page(operator: str, csrf: str, agent: str) -> str:
    body = (
        _header(operator, csrf)
        + f'<main><h1>Session of <span id="agent">{escape(agent)}</span></h1>'
        '<p>State: <b id="state">…</b> · <span id="vnc-status">connecting…</span></p>'
        '<div class="controls"><button id="takeover">Take over</button>'
        '<button id="handback">Hand back</button>'
        '<button id="stop" class="danger">Stop session</button>'
        '<span id="act-error" class="error"></span></div>'
        '<div class="columns"><section class="live"><div id="screen"></div></section>'
        '<section class="side"><h2>Pending approvals</h2>'
        '<div id="approvals" class="approvals"></div>'
        '<h2>Recording</h2><div class="recording"><video id="player" controls muted '
        'preload="metadata"></video><button id="latest">Load the latest</button>'
        '<span id="recording-state">not recorded</span></div>'
        '<h2>Timeline</h2><ol id="timeline" class="timeline"></ol></section></div></main>'
    )
    return _shell(
        f"Session of {agent}",
        body,
        csrf=csrf,
        script="session.js",
        data=f' data-agent="{escape(agent)}"',
    )


def _length(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


RECORDING_HEADS = (
    "recording",
    "agent",
    "surface",
    "started",
    "length",
    "actions",
    "approvals",
    "take overs",
    "ended",
)


def recording_row(m: dict[str, Any]) -> str:
    rid = escape(m["id"])
    ended = "recording" if m["ended_at"] is None else (m["ended_by"] or "ended")
    started = datetime.datetime.fromtimestamp(m["started_at"]).strftime("%Y-%m-%d %H:%M:%S")
    cells = (
        escape(m["agent"]),
        escape(m["surface"]),
        started,
        _length(m["length_seconds"]),
        m["actions"],
        m["approvals"],
        m["takeovers"],
        escape(ended[:80]),
    )
    link = f'<a href="/console/recordings/{rid}">{rid}</a>'
    return (
        f'<tr data-recording="{rid}"><td>{link}</td>'
        + "".join(f"<td>{c}</td>" for c in cells)
        + "</tr>"
    )


def recordings_page(operator: str, csrf: str, found: list[dict[str, Any]]) -> str:
    table = _table(
        "recordings", RECORDING_HEADS, [recording_row(m) for m in found], "No recordings."
    )
    return _list_page(operator, csrf, "Past sessions", table)


def recording_page(operator: str, csrf: str, meta: dict[str, Any]) -> str:
    rid = escape(meta["id"])
    body = (
        _header(operator, csrf) + f"<main><h1>Recording {rid}</h1><p>{escape(meta['agent'])} · "
        f"{escape(meta['surface'])} · seat {escape(meta['seat'])}</p>"
        '<div class="columns"><section class="live">'
        f'<video id="player" controls muted preload="metadata" '
        f'src="/console/recordings/{rid}/video.webm"></video></section>'
        '<section class="side"><h2>Timeline</h2><ol id="timeline" class="timeline"></ol>'
        "</section></div></main>"
    )
    return _shell(
        f"Recording {meta['id']}",
        body,
        csrf=csrf,
        script="recording.js",
        data=f' data-recording="{rid}"',
    )
