"""The gateway refuses a peer that is not on loopback: a real connection from this host's
Docker bridge address (tests/unit/test_gateway_channel.py covers everything else on
loopback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.gateway.wire import COMPUTER_USE_PATH
from orchestrator.home import CorralHome
from tests.gateway_helpers import CALL, Recorder, encode, running_gateway, signed_headers
from tests.images import ENV
from tests.integration.conftest import bridge_gateway, host_addresses

pytestmark = pytest.mark.anyio


async def test_a_non_loopback_peer_is_refused_with_403_and_audited(
    tmp_path: Path, free_tcp_port: int
) -> None:
    # Listen on this host's own docker0 address (not 0.0.0.0: nothing else needs to reach it)
    # and connect to it: the peer is this host, but not on loopback. Docker's MASQUERADE rule
    # may rewrite the source to the host's primary address: still one of its own.
    home = CorralHome(root=tmp_path / "bridge-home", env=ENV)
    address = bridge_gateway()
    async with running_gateway(home, address, free_tcp_port, Recorder()) as gw:
        body = encode(CALL)
        async with gw.client() as client:
            response = await client.post(
                COMPUTER_USE_PATH, content=body, headers=signed_headers(gw.key, body)
            )
            health = await client.get("/healthz")

        assert response.status_code == 403
        assert response.json() == {"error": "peer is not on loopback"}
        [refusal] = gw.refusals()
        assert refusal["reason"] == "peer is not on loopback"
        assert refusal["path"] == COMPUTER_USE_PATH
        assert refusal["peer"] in host_addresses()
        assert gw.handler.calls == []
        assert health.status_code == 200
