"""`corral mcp --agent NAME`: serve MCP for one agent, over stdio or Streamable HTTP."""

from __future__ import annotations

import logging
import os
import sys

import anyio
import click

from corral_cli.common import agent_arg, err, fail, read_home
from orchestrator.home import CorralHome


@click.command()
@click.option("--agent", required=True, help="The AI employee this server speaks for.")
@click.option("--http", "use_http", is_flag=True, help="Serve Streamable HTTP on 127.0.0.1.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=9031, show_default=True, help="HTTP port."
)
@click.option(
    "--show-token",
    is_flag=True,
    help="With --http: print the agent's bearer token (made if absent) and exit.",
)
@click.option(
    "--rotate-token",
    is_flag=True,
    help="With --http: replace the agent's bearer token, print the new one and exit.",
)
def mcp(agent: str, use_http: bool, port: int, show_token: bool, rotate_token: bool) -> None:
    """Serve MCP for one agent: stdio by default, or Streamable HTTP at /mcp.

    Over HTTP every request needs `Authorization: Bearer <token>`, the agent's token in
    CORRAL_HOME/tokens/<agent>.token; --show-token prints it."""
    from mcp_front.server import serve_http, serve_stdio

    agent_arg(agent, "--agent")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    home = read_home()
    home.ensure()
    if (show_token or rotate_token) and not use_http:
        fail("--show-token and --rotate-token go with --http", code=2)
    if show_token or rotate_token:
        _print_token(home, agent, rotate=rotate_token)
        return
    if use_http:
        err.print(f"corral MCP for agent {agent}: http://127.0.0.1:{port}/mcp")
        anyio.run(serve_http, home, agent, port)
    else:
        anyio.run(serve_stdio, home, agent)
    leave_at_once()


def leave_at_once() -> None:
    """End the process now that the server has returned: its pool's containers removed,
    every answer written. The interpreter's own teardown (unloading the ~1000 modules an
    MCP server imports) cost 0.24-0.28 s of CPU and as long in wall time at every
    conversation's end, beside the other agents' calls on the same host (measured with
    py-spy: no Python frame in it); nothing of corral's waits on it (no atexit hook, no
    finalizer), so the logs and standard streams are flushed and the process leaves. An
    exception out of the server does not come here: it ends the process as usual."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _print_token(home: CorralHome, agent: str, *, rotate: bool) -> None:
    from orchestrator.agents.tokens import load_or_create_token, rotate_token, token_path
    from orchestrator.errors import KeyFileError

    try:
        token = rotate_token(home, agent) if rotate else load_or_create_token(home, agent)
    except (KeyFileError, OSError) as exc:
        fail(exc)
    what = "new bearer token" if rotate else "bearer token"
    err.print(f"{what} for agent {agent} ({token_path(home, agent)}); clients send")
    err.print(f"  Authorization: Bearer {token}", markup=False)
    print(token)
