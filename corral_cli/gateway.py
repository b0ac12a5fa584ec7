"""`corral gateway`: run the gateway (kiosk sessions, rigs, the console) until a signal."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from functools import partial
from pathlib import Path

import anyio
import click
from pydantic import ValidationError
from rich.markup import escape

from corral_cli.common import err, fail, read_home
from orchestrator.config import GatewayConfig, load_config
from orchestrator.errors import ConfigError, CorralError
from orchestrator.home import CorralHome

MCP_SNIPPET = """
Connect an MCP client (agent "alice"; create it with `corral agents new alice`):
  {{"mcpServers": {{"corral": {{"command": "{corral}",
                              "args": ["mcp", "--agent", "alice"],
                              "env": {{"CORRAL_HOME": "{home}"}}}}}}}}
"""
STUCK_STOP_SECONDS = 45.0  # a stop still under way after this long dumps every stack
THREADS_JOIN_SECONDS = 10.0  # worker threads still busy once every session has ended
OPTION_ALLOWED = {"host": "127.0.0.1, ::1 or localhost", "port": "an integer from 1 to 65535"}


@click.command()
@click.option(
    "--host",
    default=None,
    help="Listen address for this run: 127.0.0.1, ::1 or localhost (default: [gateway] host).",
)
@click.option("--port", default=None, help="Port for this run, 1-65535 (default: [gateway] port).")
@click.option(
    "--rotate-key",
    is_flag=True,
    help="Give every agent a new channel key (CORRAL_HOME/channel/) before starting.",
)
def gateway(host: str | None, port: str | None, rotate_key: bool) -> None:
    """Run the gateway on [gateway] host:port (default 127.0.0.1:9030). It owns kiosk
    sessions; `corral mcp` forwards computer_* calls to it over signed loopback HTTP.

    SIGTERM or Ctrl-C ends every session (its containers removed) before it exits.
    `corral mcp` finds the gateway through config.toml: when --port differs from
    [gateway] port, set it there too for MCP clients."""
    from orchestrator.surfaces.heap import GATEWAY_ARENAS, limit_arenas

    limit_arenas(GATEWAY_ARENAS)  # before any thread allocates
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    home = read_home()
    home.ensure()
    settings = _settings(home, host, port)
    if rotate_key:
        _rotate_key(home)
    snippet = MCP_SNIPPET.format(corral=Path(sys.argv[0]).resolve(), home=home.root)
    try:
        anyio.run(_serve, home, settings, snippet)
        _exit_past_stuck_threads()
    except* CorralError as group:  # GatewayStartError (port taken), KeyFileError (key mode)
        for problem in group.exceptions:
            err.print(f"[red]error:[/red] {escape(str(problem))}")
        raise SystemExit(1) from None
    except* KeyboardInterrupt:
        pass


def _settings(home: CorralHome, host: str | None, port: str | None) -> GatewayConfig:
    """[gateway] with --host/--port over it; a bad option exits 2 naming what it allows."""
    try:
        settings = load_config(home.config_file, home.env.image_tag).gateway
    except ConfigError as exc:
        fail(exc)
    try:
        overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
        # Options are text: taken as the TOML keys would be, numbers from their digits.
        merged = {**settings.model_dump(), **overrides}
        return GatewayConfig.model_validate(merged, strict=False)
    except ValidationError as exc:
        for bad in exc.errors():
            name = str(bad["loc"][0])
            got = escape(repr(bad.get("input")))
            allowed = OPTION_ALLOWED.get(name, "?")
            err.print(f"[red]error:[/red] --{name}: must be {allowed} (got {got})")
        raise SystemExit(2) from exc


def _rotate_key(home: CorralHome) -> None:
    from orchestrator.errors import KeyFileError
    from orchestrator.gateway.signing import rotate_keys

    try:
        agents = rotate_keys(home)
    except (KeyFileError, OSError) as exc:
        fail(f"cannot rotate the channel keys: {exc}")
    err.print(f"new channel keys for {', '.join(agents) or 'no agent yet'}")


async def _serve(home: CorralHome, settings: GatewayConfig, snippet: str) -> None:
    from orchestrator.gateway.service import run_gateway
    from orchestrator.gateway.wire import gateway_base_url

    url = gateway_base_url(settings.host, settings.port)
    ready = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, tg.cancel_scope)
        tg.start_soon(partial(run_gateway, home, ready, host=settings.host, port=settings.port))
        await ready.wait()
        err.print(f"corral gateway listening on {url} (Ctrl-C stops it)")
        err.print(snippet, markup=False)
        err.print(console_hint(home, url), markup=False)


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            err.print(f"{signal.Signals(signum).name}: ending every session, then stopping")
            # A stop that takes this long is stuck somewhere: every thread's stack goes to
            # stderr (where, is the bug to fix), and the stop goes on.
            faulthandler.dump_traceback_later(STUCK_STOP_SECONDS, exit=False)
            scope.cancel()
            return


def _exit_past_stuck_threads() -> None:
    """Every session has ended: exit even if a worker thread is still blocked in a call
    that never returns (an engine call on a hung container), after a bounded wait and
    with its stack on stderr, instead of hanging at the interpreter's thread join."""
    faulthandler.cancel_dump_traceback_later()
    deadline = time.monotonic() + THREADS_JOIN_SECONDS
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threading.enumerate() if t.is_alive() and not t.daemon]
    stuck = [name for name in stuck if name != threading.main_thread().name]
    if stuck:
        err.print(f"threads still running at exit, left behind: {', '.join(stuck)}")
        faulthandler.dump_traceback(all_threads=True)
        sys.stderr.flush()
        os._exit(0)


def console_hint(home: CorralHome, url: str) -> str:
    """Where the console is, and how to get in."""
    from orchestrator.errors import OperatorError
    from orchestrator.people.operators import list_operators

    try:
        names = [op.name for op in list_operators(home)]
    except OperatorError as exc:
        names, problem = [], f" ({exc})"
    else:
        problem = ""
    first = (
        f"operators: {', '.join(names)} (log in with the token `corral operators add` printed)"
        if names
        else "no operator yet: create the first one with `corral operators add NAME` "
        "(it prints the login token once)"
    )
    return f"operator console: {url}/console/ ; {first}{problem}"
