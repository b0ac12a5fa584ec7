"""The CLI's side of the operators' signed API (orchestrator.gateway.admin_api)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from orchestrator.config import load_config
from orchestrator.errors import AdminError
from orchestrator.gateway.signing import load_or_create_key, new_nonce, sign
from orchestrator.gateway.wire import gateway_base_url
from orchestrator.home import CorralHome

TIMEOUT_SECONDS = 30.0


def admin_call(home: CorralHome, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST `payload` to the gateway's `path`, signed with CORRAL_HOME/gateway.key."""
    config = load_config(home.config_file)
    base = gateway_base_url(config.gateway.host, config.gateway.port)
    key = load_or_create_key(home)
    body = json.dumps(payload).encode()
    headers = sign(key, "POST", path, body, now=time.time(), nonce=new_nonce())
    headers["Content-Type"] = "application/json"
    try:
        response = httpx.post(base + path, content=body, headers=headers, timeout=TIMEOUT_SECONDS)
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
