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


def session_rows(sessions: list[dict[str, Any]]) -> str:
    rows = []
    for s in sessions:
        agent = escape(s["agent"])
        rows.append(
            f'<tr data-agent="{agent}" data-session="{escape(s["session"])}">'
            f'<td><a href="/console/sessions/{agent}">{agent}</a></td>'
            f"<td>{escape(s['kind'])}</td><td>{_when(s['started_at'])}</td>"
            f'<td class="actions">{s["actions_used"]} / {s["actions_left"]}</td>'
            f'<td class="state">{escape(s["state"])}</td></tr>'
        )
    return "".join(rows) or '<tr class="empty"><td colspan="5">No running sessions.</td></tr>'


def sessions_page(operator: str, csrf: str, sessions: list[dict[str, Any]]) -> str:
    body = (
        _header(operator, csrf)
        + '<main><h1>Sessions</h1><table id="sessions"><thead><tr><th>agent</th><th>kind</th>'
        "<th>started</th><th>actions used / left</th><th>state</th></tr></thead>"
        f"<tbody>{session_rows(sessions)}</tbody></table>"
        '<h2>Pending approvals</h2><div id="approvals" class="approvals"></div></main>'
    )
    return _shell("Sessions", body, csrf=csrf, script="sessions.js")


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
        '<h2>Timeline</h2><ol id="timeline" class="timeline"></ol></section></div></main>'
    )
    return _shell(
        f"Session of {agent}",
        body,
        csrf=csrf,
        script="session.js",
        data=f' data-agent="{escape(agent)}"',
    )
