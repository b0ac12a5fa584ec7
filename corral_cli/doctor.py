"""`corral doctor` (is this machine ready?) and `corral reap` (orphans removed)."""

from __future__ import annotations

import anyio
import click
from rich.markup import escape
from rich.table import Table

from corral_cli.common import out, read_home
from orchestrator.backends.owner import LABEL_AGENT, LABEL_KIND, LABEL_SESSION
from orchestrator.backends.reaper import reap_orphans
from orchestrator.config import CorralConfig, load_agent
from orchestrator.errors import ConfigError, CorralError
from orchestrator.gateway.warm_pools import wanted_sizes
from orchestrator.home import CorralHome
from orchestrator.pools.warm import POOL_AGENT
from orchestrator.runtime import Runtime, open_runtime

Row = tuple[str, bool, str]  # check, ok, detail
POOL_KINDS = {"rig-browser": "browser", "rig-desktop": "desktop", "script": "scripts"}


@click.command()
def doctor() -> None:
    """Check this machine: config, engine, sandbox image; reap orphaned containers."""
    home = read_home()
    rows: list[Row] = []
    try:
        anyio.run(_check, home, rows)
    except CorralError as exc:
        rows.append(("engine", False, str(exc)))
    table = Table("check", "ok", "detail", title="corral doctor")
    for name, ok, detail in rows:
        # The details name config tables ("[backend] ..."): text, not rich's markup.
        table.add_row(escape(name), "[green]yes[/green]" if ok else "[red]NO[/red]", escape(detail))
    out.print(table)
    if not all(ok for _, ok, _ in rows):
        raise SystemExit(1)


async def _check(home: CorralHome, rows: list[Row]) -> None:
    """Append a row per check to `rows` (kept if the engine check raises)."""
    async with open_runtime(home) as rt:
        rows.append(("CORRAL_HOME", True, str(home.root)))
        rows.extend(_file_rows(home, rt))
        sandbox = rt.sandbox_config()
        image = "?" if isinstance(sandbox, ConfigError) else sandbox.image
        runtime = getattr(sandbox, "runtime", "runc")
        rows.extend(await rt.backend.doctor_rows(image, runtime, rt.audit))
        if not isinstance(rt.config, ConfigError):
            rows.extend(await _pool_rows(home, rt.config, rt))


async def _pool_rows(home: CorralHome, config: CorralConfig, rt: Runtime) -> list[Row]:
    """What the gateway's warm pools keep (`orchestrator.gateway.warm_pools`), and the
    pool-made containers running on this engine now with the memory they hold (each with
    the proxy made with its network; a member a session claimed keeps its pool label)."""
    if not rt.backend.supports_pools:
        return [("warm pools", True, "none: this backend has no pools")]
    sizes = await wanted_sizes(home, config)
    configured = config.container.warm_configured()
    members = await rt.backend.list_managed({LABEL_AGENT: POOL_AGENT})
    kind_of = {
        m.labels.get(LABEL_SESSION): m.labels.get(LABEL_KIND)
        for m in members
        if m.labels.get(LABEL_KIND) != "proxy"
    }
    held: dict[str, list[int]] = {}  # kind: [members, bytes]
    for member in members:
        kind = member.labels.get(LABEL_KIND) or "?"
        proxy = kind == "proxy"
        if proxy:  # an armed proxy counts with the member on its network
            kind = kind_of.get(member.labels.get(LABEL_SESSION)) or "proxy"
        used = await rt.backend.memory_bytes(member.id) if member.status == "running" else None
        tally = held.setdefault(POOL_KINDS.get(kind, kind), [0, 0])
        tally[0] += 0 if proxy else 1
        tally[1] += used or 0
    rows = []
    for kind, size in sizes.items():
        if configured[kind] is not None:
            why = "config.toml"
        else:
            why = "an agent may start one" if size else "no agent may start one"
        count, used = held.pop(kind, [0, 0])
        running = f"{count} running now (idle or claimed), {used / 2**20:.0f} MiB with proxies"
        rows.append((f"warm {kind}", True, f"keeps {size} ({why}); {running}"))
    for kind, (count, used) in sorted(held.items()):  # `corral mcp`'s script pools
        rows.append((f"warm {kind}", True, f"{count} running now, {used / 2**20:.0f} MiB"))
    return rows


def _file_rows(home: CorralHome, rt: Runtime) -> list[Row]:
    """config.toml and every agent.toml: valid or what is wrong."""
    if isinstance(rt.config, ConfigError):
        rows: list[Row] = [("config.toml", False, str(rt.config))]
    else:
        absent = "absent: defaults in force"
        rows = [("config.toml", True, "valid" if home.config_file.exists() else absent)]
    for path in sorted(home.agents_dir.glob("*/agent.toml")):
        try:
            load_agent(path)
            rows.append((f"agent {path.parent.name}", True, "valid"))
        except ConfigError as exc:
            rows.append((f"agent {path.parent.name}", False, str(exc)))
    return rows


@click.command()
def reap() -> None:
    """Remove corral containers whose owning process is gone (never a live owner's)."""
    removed = anyio.run(_reap, read_home())
    out.print(
        f"removed {len(removed)} orphaned container(s)" + "".join(f"\n  {n}" for n in removed)
    )


async def _reap(home: CorralHome) -> list[str]:
    async with open_runtime(home) as rt:
        removed = await reap_orphans(rt.backend, rt.audit)
        networks = await rt.backend.reap_networks()
        return removed + [f"network {name}" for name in networks]
