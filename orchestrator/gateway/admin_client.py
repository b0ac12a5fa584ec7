"""The CLI's side of the operators' API (orchestrator.gateway.admin_api): each request
carries the operator's token (`Authorization: Bearer`), never a channel key."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from orchestrator.config import load_config
from orchestrator.errors import AdminError
from orchestrator.gateway.wire import gateway_base_url
from orchestrator.home import CorralHome
from orchestrator.people.peer import listener_uid

TIMEOUT_SECONDS = 30.0


def _check_listener(home: CorralHome, host: str, port: int) -> None:
    """Refuse to send the token to a port another local user listens on (a server started
    there while the gateway is down would collect it). corral's gateway runs as the user
    that owns CORRAL_HOME; a listener the kernel's tables do not show is not refused."""
    uid = listener_uid(host, port)
    try:
        owner = home.root.stat().st_uid
    except OSError:
        owner = os.getuid()
    if uid is not None and uid != owner:
        raise AdminError(
            f"the process listening on {host}:{port} belongs to uid {uid}, not to the owner "
            f"of {home.root} (uid {owner}): it is not your corral gateway, and your operator "
            "token was not sent to it"
        )


def admin_call(home: CorralHome, token: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST `payload` to the gateway's `path` as the operator whose token `token` is."""
    config = load_config(home.config_file)
    base = gateway_base_url(config.gateway.host, config.gateway.port)
    _check_listener(home, config.gateway.host, config.gateway.port)
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    try:
        # Never through an HTTP(S)_PROXY: the token goes to the loopback gateway alone.
        response = httpx.post(
            base + path, content=body, headers=headers, timeout=TIMEOUT_SECONDS, trust_env=False
        )
    except httpx.TransportError as exc:
        raise AdminError(
            f"the corral gateway at {base} is not answering ({exc.__class__.__name__}); "
            "start it with `corral gateway`"
        ) from exc
    try:
        data = response.json()
    except ValueError:
        data = {}
    if response.status_code != 200:
        raise AdminError(str(data.get("error") or f"HTTP {response.status_code}"))
    if not isinstance(data, dict):
        raise AdminError("the gateway's answer is not a JSON object")
    return data
