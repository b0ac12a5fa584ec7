"""The warm pools (issues 14 and 23) in a real `corral gateway`: by default a new user's
first surface of a kind in use comes from a pool, the pools follow the agents' files,
and a gateway SIGKILLed with full pools leaves no container (its owner watchdog removes
them) and, after `corral reap`, no session network and no INPUT rule."""

from __future__ import annotations

import os
import re
import signal
import subprocess

import docker
import mcp_types as types
import pytest

from orchestrator.backends.docker.firewall import input_drop_bridges
from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome
from tests.e2e.conftest import connect, wait_until
from tests.e2e.gateways import running_gateway
from tests.e2e.test_codrive import audit_events
from tests.helpers import corral_bin, env_with_home

pytestmark = pytest.mark.anyio
FULL_POOLS = "[container.kiosk]\nwarm = 1\n\n[container.rigs]\nbrowser_warm = 1\ndesktop_warm = 1\n"


def write_agent(home: CorralHome, name: str, *families: str) -> None:
    text = render_new_agent(name)
    for family in families:
        text = text.replace(f"{family} = false", f"{family} = true")
    path = home.agent_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def doctor_rows(home: CorralHome, environ: dict[str, str | None]) -> dict[str, str]:
    """`corral doctor`'s rows (check: detail)."""
    env = {**env_with_home(home), "COLUMNS": "400"}  # one table row per line
    for name, value in environ.items():
        if value is None:
            env.pop(name, None)
    done = subprocess.run(
        [corral_bin(), "doctor"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cells = [[c.strip() for c in line.split("│")] for line in done.stdout.splitlines()]
    return {row[1]: row[3] for row in cells if len(row) == 5}


def running_kinds(client: docker.DockerClient, pid: int) -> list[str]:
    owned = {"label": [f"corral.owner.pid={pid}"]}
    found = client.containers.list(ignore_removed=True, filters=owned)
    return sorted(c.labels.get("corral.kind", "?") for c in found if c.status == "running")


def browser_pool_ready(home: CorralHome) -> bool:
    joined = audit_events(home, "rig_pool_ready")
    return any(e["details"]["surface"] == "browser" and e["details"]["idle"] >= 1 for e in joined)


async def test_a_new_users_first_rig_comes_from_the_pool_the_gateway_keeps_by_default(
    corral_home: CorralHome, docker_client: docker.DockerClient
) -> None:
    """No `warm` in config.toml and the product's default (CORRAL_WARM_DEFAULT unset): one
    started browser rig (and its armed proxy) for the one kind an agent uses, none of the
    others; the first browser_use call takes it; the pools follow the agents' files."""
    write_agent(corral_home, "wendy", "browser_use")
    default = {"CORRAL_WARM_DEFAULT": None}
    async with running_gateway(corral_home, environ=default) as (_, pid):
        await wait_until(lambda: running_kinds(docker_client, pid) == ["proxy", "rig-browser"], 120)
        # A running container is not yet a pool member (its browser may still be starting):
        # the pool says when one joined.
        await wait_until(lambda: browser_pool_ready(corral_home), 120)
        said = doctor_rows(corral_home, default)
        assert re.search(
            r"keeps 1 \(an agent may start one\); 1 running now.* [1-9]\d* MiB",
            said["warm browser"],
        )
        assert said["warm kiosk"].startswith("keeps 0 (no agent may start one); 0 running")
        async with connect(corral_home, "stdio", agent="wendy") as mcp:
            shot = await mcp.client.call_tool("browser_use", {"verb": "screenshot"})
            assert not shot.is_error
            assert any(isinstance(c, types.ImageContent) for c in shot.content)
            started = audit_events(corral_home, "rig_started")
            assert [e["details"]["warm"] for e in started] == [True]
            assert started[0]["details"]["rig"].startswith("r")
            # The pool refills behind the claim: wendy's rig, and one waiting again.
            await wait_until(
                lambda: running_kinds(docker_client, pid).count("rig-browser") == 2, 120
            )
        # An agent turned on for kiosks: a kiosk is started ahead too.
        write_agent(corral_home, "kim", "computer_use")
        await wait_until(lambda: "kiosk" in running_kinds(docker_client, pid), 120)
        assert "rig-desktop" not in running_kinds(docker_client, pid)
        # The last agent of a kind turned off: its pool empties.
        write_agent(corral_home, "kim")
        await wait_until(lambda: "kiosk" not in running_kinds(docker_client, pid), 60)
    ready = audit_events(corral_home, "rig_pool_ready")
    assert ready and {e["details"]["surface"] for e in ready} == {"browser"}


async def test_killing_the_gateway_with_full_pools_leaks_nothing(
    corral_home: CorralHome, docker_client: docker.DockerClient
) -> None:
    async with running_gateway(corral_home, FULL_POOLS) as (_, pid):
        owned = {"label": [f"corral.owner.pid={pid}"]}

        def networks() -> list[str]:
            return [n.name for n in docker_client.networks.list(filters=owned)]

        full = ["kiosk", "proxy", "proxy", "proxy", "rig-browser", "rig-desktop"]
        await wait_until(
            lambda: running_kinds(docker_client, pid) == full and len(networks()) == 3, 180
        )
        bridges = {"crl" + name.removeprefix("corral-s-") for name in networks()}
        assert bridges <= set(await input_drop_bridges())  # each pool network has its rule
        os.kill(pid, signal.SIGKILL)  # no cleanup code runs in the gateway
        await wait_until(
            lambda: not docker_client.containers.list(ignore_removed=True, all=True, filters=owned),
            limit=60,
        )
    # The networks outlive the killed gateway; `corral reap` removes them and their rules
    # (or a gateway another test starts meanwhile under `make test` does: not asserted
    # present here; both remove the rules, checked below).
    reap = subprocess.run(
        [corral_bin(), "reap"], env=env_with_home(corral_home), capture_output=True, timeout=60
    )
    assert reap.returncode == 0, reap.stderr
    assert networks() == []
    assert not bridges & set(await input_drop_bridges())
