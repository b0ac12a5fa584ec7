"""`corral doctor` (is this machine ready?) and `corral reap` (orphans removed)."""

from __future__ import annotations

import anyio
import click
from rich.table import Table

from corral_cli.common import out, read_home
from orchestrator.backends.reaper import reap_orphans
from orchestrator.config import load_agent
from orchestrator.errors import ConfigError, CorralError
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime, open_runtime

Row = tuple[str, bool, str]  # check, ok, detail


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
        table.add_row(name, "[green]yes[/green]" if ok else "[red]NO[/red]", detail)
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
