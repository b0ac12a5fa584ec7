"""The `corral` command line. The only place that reads the environment."""

from __future__ import annotations

import signal
import sys
from functools import partial
from pathlib import Path

import anyio
import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.backends.reaper import reap_orphans
from orchestrator.config import (
    AGENT_NAME_RE,
    load_agent,
    load_config,
    render_new_agent,
)
from orchestrator.errors import (
    ConfigError,
    CorralError,
    ParamError,
    SandboxBusy,
    SandboxUnavailable,
)
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime, open_runtime
from sandboxes.script import ScriptResult, execute_program
from sandboxes.script_policy import TIMEOUT_DEFAULT, parse_params

EXIT_TIMEOUT = 124
EXIT_UNAVAILABLE = 125
EXIT_BUSY = 75  # EX_TEMPFAIL: every script slot on this host is taken; try again
EXTENSION_LANGUAGE = {".py": "python", ".sh": "sh", ".bash": "bash"}

err = Console(stderr=True, highlight=False, emoji=False)
out = Console(highlight=False, emoji=False)


def _home() -> CorralHome:
    return CorralHome.from_env()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="corral")
def main() -> None:
    """corral: sandboxed execution for AI employees."""


# --------------------------------------------------------------------------- run
def infer_language(path: Path, text: str) -> str:
    first = text.splitlines()[0] if text else ""
    if first.startswith("#!"):
        words = first[2:].split()
        # `#!/usr/bin/env [-S] python3 -u` names the interpreter after env and its flags.
        if words and words[0].rsplit("/", 1)[-1] == "env":
            words = [w for w in words[1:] if not w.startswith("-")]
        interpreter = words[0].rsplit("/", 1)[-1] if words else ""
        if interpreter.startswith("python"):
            return "python"
        if interpreter in ("bash", "sh"):
            return interpreter
    return EXTENSION_LANGUAGE.get(path.suffix, "python")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--timeout",
    "timeout_seconds",
    default=str(TIMEOUT_DEFAULT),
    show_default=True,
    help="Seconds before the script is killed (1-300).",
)
@click.option(
    "--language",
    type=click.Choice(["python", "bash", "sh"]),
    default=None,
    help="Interpreter; inferred from the extension or shebang when omitted.",
)
@click.option("--agent", default="cli", show_default=True, help="Agent name for the audit log.")
def run(file: Path, timeout_seconds: str, language: str | None, agent: str) -> None:
    """Run FILE in the script sandbox, stream its output, exit with its exit code.

    In a terminal a status line shows the phase and the elapsed time under the output;
    when stdout is not a terminal the output is passed through byte for byte.

    Exit codes: the script's own; 124 on timeout; 125 when the sandbox is
    unavailable and 75 when every script slot stays taken (the script did not run
    in either case); 2 on a bad option.
    """
    text = file.read_text(encoding="utf-8")
    try:
        params = parse_params(
            {
                "code": text,
                "language": language or infer_language(file, text),
                "timeout_seconds": timeout_seconds,
            }
        )
    except ParamError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise SystemExit(2) from exc

    def stream(chunk: bytes) -> None:
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()

    async def execute(rt: Runtime) -> ScriptResult:
        ctx = rt.script_context(agent)
        if not out.is_terminal:  # a pipe or a file (CI logs): the bytes as written, nothing else
            return await execute_program(params, ctx, on_output=stream)
        from corral_cli.run_display import TerminalRun

        with TerminalRun(out, params.timeout_seconds) as shown:
            return await execute_program(params, ctx, on_output=shown.on_output, events=shown)

    async def go() -> int:
        async with open_runtime(_home()) as rt:
            await reap_orphans(rt.backend)
            try:
                result = await execute(rt)
            except SandboxUnavailable as exc:
                err.print(f"[red]{escape(str(exc))}[/red]")
                return EXIT_UNAVAILABLE
            except SandboxBusy as exc:
                err.print(f"[yellow]{escape(str(exc))}[/yellow]")
                return EXIT_BUSY
        if result.truncated:
            note = (
                f"[output truncated: {result.returned_bytes} of {result.output_bytes} bytes kept]"
            )
            err.print(f"[yellow]{escape(note)}[/yellow]")
        err.print(f"[dim]{escape(f'[corral: {result.summary()}]')}[/dim]")
        if result.timed_out:
            return EXIT_TIMEOUT
        return result.exit_code if result.exit_code is not None else 1

    try:
        code = anyio.run(go)
    except CorralError as exc:
        err.print(f"[red]error:[/red] {exc}")
        code = 1
    raise SystemExit(code)


# ------------------------------------------------------------------------ images
@main.group()
def images() -> None:
    """Build corral's images locally (nothing is pulled unless you say --pull-base)."""


@images.command("build")
@click.option("--rebuild", is_flag=True, help="Rebuild even if the image matches its recipe.")
@click.option(
    "--pull-base",
    is_flag=True,
    help="If the base image is absent, pull debian:bookworm-slim instead of debootstrapping.",
)
@click.option(
    "--mirror",
    envvar="CORRAL_DEBIAN_MIRROR",
    default="http://deb.debian.org/debian",
    show_default=True,
    help="Debian mirror for debootstrap.",
)
def images_build(rebuild: bool, pull_base: bool, mirror: str) -> None:
    """Build the sandbox image (Dockerfile.sandbox) and the rig images (rig_images/)."""
    from orchestrator.backends.docker.images import build_all

    home = _home()
    try:
        config = load_config(home.config_file)
        with err.status("building images…") as status:

            def say(line: str) -> None:
                status.update(line[:100])
                err.print(f"  {line}", markup=False)

            outcome = build_all(
                config.container, say, rebuild=rebuild, pull_base=pull_base, mirror=mirror
            )
    except CorralError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise SystemExit(1) from exc
    verb = "built" if outcome.built else "cached"
    err.print(f"[green]{outcome.image}: {verb}[/green]")


def _add_image_commands() -> None:
    from corral_cli.images import images_push

    images.add_command(images_push)


_add_image_commands()


# ------------------------------------------------------------------------ agents
@main.group()
def agents() -> None:
    """Manage AI employees (agents/<name>/agent.toml)."""


@agents.command("new")
@click.argument("name")
def agents_new(name: str) -> None:
    """Write agents/NAME/agent.toml with every optional capability off."""
    if not AGENT_NAME_RE.fullmatch(name):
        err.print(
            f"[red]error:[/red] agent name {name!r}: must be a lower-case letter then up to 62 "
            "lower-case letters, digits, '-' or '_'"
        )
        raise SystemExit(2)
    home = _home()
    home.ensure()
    path = home.agent_file(name)
    if path.exists():
        err.print(f"[red]error:[/red] {path} already exists; edit it or remove it first")
        raise SystemExit(1)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(render_new_agent(name))
    out.print(f"wrote {path}")


@agents.command("list")
def agents_list() -> None:
    """List agents and whether their agent.toml is valid."""
    home = _home()
    table = Table("agent", "status", "capabilities on")
    for path in sorted(home.agents_dir.glob("*/agent.toml")) if home.agents_dir.exists() else []:
        try:
            agent = load_agent(path)
        except ConfigError as exc:
            table.add_row(path.parent.name, "[red]invalid[/red]", "; ".join(exc.problems))
            continue
        caps = agent.capabilities.model_dump()
        on = [k for k, v in caps.items() if v is True]
        table.add_row(agent.name, "ok", ", ".join(on) or "-")
    out.print(table)


# --------------------------------------------------------------------------- mcp
@main.command()
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
    import logging

    from mcp_front.server import serve_http, serve_stdio

    if not AGENT_NAME_RE.fullmatch(agent):
        err.print(f"[red]error:[/red] --agent {agent!r}: not a valid agent name")
        raise SystemExit(2)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    home = _home()
    home.ensure()
    if (show_token or rotate_token) and not use_http:
        err.print("[red]error:[/red] --show-token and --rotate-token go with --http")
        raise SystemExit(2)
    if show_token or rotate_token:
        _print_token(home, agent, rotate=rotate_token)
        return
    if use_http:
        err.print(f"corral MCP for agent {agent}: http://127.0.0.1:{port}/mcp")
        anyio.run(serve_http, home, agent, port)
    else:
        anyio.run(serve_stdio, home, agent)


def _print_token(home: CorralHome, agent: str, *, rotate: bool) -> None:
    from orchestrator.agents.tokens import load_or_create_token, rotate_token, token_path
    from orchestrator.errors import KeyFileError

    try:
        token = rotate_token(home, agent) if rotate else load_or_create_token(home, agent)
    except (KeyFileError, OSError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise SystemExit(1) from exc
    what = "new bearer token" if rotate else "bearer token"
    err.print(f"{what} for agent {agent} ({token_path(home, agent)}); clients send")
    err.print(f"  Authorization: Bearer {token}", markup=False)
    print(token)


# ----------------------------------------------------------------------- gateway
@main.command()
@click.option(
    "--host",
    default=None,
    help="Listen address for this run: 127.0.0.1, ::1 or localhost (default: [gateway] host).",
)
@click.option("--port", default=None, help="Port for this run, 1-65535 (default: [gateway] port).")
@click.option(
    "--rotate-key",
    is_flag=True,
    help="Replace CORRAL_HOME/gateway.key with a new key before starting.",
)
def gateway(host: str | None, port: str | None, rotate_key: bool) -> None:
    """Run the gateway on [gateway] host:port (default 127.0.0.1:9030). It owns kiosk
    sessions; `corral mcp` forwards computer_* calls to it over signed loopback HTTP.

    SIGTERM or Ctrl-C ends every session (its containers removed) before it exits.
    `corral mcp` finds the gateway through config.toml: when --port differs from
    [gateway] port, set it there too for MCP clients."""
    import logging

    from orchestrator.config import GatewayConfig
    from orchestrator.gateway.service import run_gateway
    from orchestrator.gateway.wire import gateway_base_url

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    home = _home()
    home.ensure()
    try:
        settings = load_config(home.config_file).gateway
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise SystemExit(1) from exc
    try:
        overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
        settings = GatewayConfig.model_validate({**settings.model_dump(), **overrides})
    except ValidationError as exc:
        allowed = {"host": "127.0.0.1, ::1 or localhost", "port": "an integer from 1 to 65535"}
        for bad in exc.errors():
            name = str(bad["loc"][0])
            got = escape(repr(bad.get("input")))
            err.print(f"[red]error:[/red] --{name}: must be {allowed.get(name, '?')} (got {got})")
        raise SystemExit(2) from exc
    if rotate_key:
        from orchestrator.errors import KeyFileError
        from orchestrator.gateway.signing import key_path
        from orchestrator.gateway.signing import rotate_key as rotate

        try:
            rotate(home)
        except (KeyFileError, OSError) as exc:
            err.print(f"[red]error:[/red] cannot rotate the gateway key: {escape(str(exc))}")
            raise SystemExit(1) from exc
        err.print(f"new gateway key in {key_path(home)}")
    url = gateway_base_url(settings.host, settings.port)
    snippet = MCP_SNIPPET.format(corral=Path(sys.argv[0]).resolve(), home=home.root)

    async def stop_on_signal(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                err.print(f"{signal.Signals(signum).name}: ending every session, then stopping")
                scope.cancel()
                return

    async def go() -> None:
        ready = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signal, tg.cancel_scope)
            tg.start_soon(partial(run_gateway, home, ready, host=settings.host, port=settings.port))
            await ready.wait()
            err.print(f"corral gateway listening on {url} (Ctrl-C stops it)")
            err.print(snippet, markup=False)
            err.print(console_hint(home, url), markup=False)

    try:
        anyio.run(go)
    except* CorralError as group:  # GatewayStartError (port taken), KeyFileError (key mode)
        for problem in group.exceptions:
            err.print(f"[red]error:[/red] {escape(str(problem))}")
        raise SystemExit(1) from None
    except* KeyboardInterrupt:
        pass


MCP_SNIPPET = """
Connect an MCP client (agent "alice"; create it with `corral agents new alice`):
  {{"mcpServers": {{"corral": {{"command": "{corral}",
                              "args": ["mcp", "--agent", "alice"],
                              "env": {{"CORRAL_HOME": "{home}"}}}}}}}}
"""


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


# ------------------------------------------------------------------------ people
def _add_people_commands() -> None:
    from corral_cli.people import COMMANDS

    for command in COMMANDS:
        main.add_command(command)


_add_people_commands()


# ------------------------------------------------------------------------ grants
@main.group()
def grants() -> None:
    """Grant or revoke scoped tools ([capabilities] scoped_tools) for an agent."""


def _agent_arg(agent: str) -> str:
    if not AGENT_NAME_RE.fullmatch(agent):
        err.print(f"[red]error:[/red] agent {agent!r}: not a valid agent name")
        raise SystemExit(2)
    return agent


@grants.command("add")
@click.argument("agent")
@click.argument("tool")
def grants_add(agent: str, tool: str) -> None:
    """Give AGENT an active grant for TOOL; its MCP clients are told within seconds."""
    from orchestrator.agents.grants import add_grant

    changed = add_grant(_home(), _agent_arg(agent), tool)
    out.print(f"granted {tool} to {agent}" if changed else f"{agent} already holds {tool}")


@grants.command("revoke")
@click.argument("agent")
@click.argument("tool")
def grants_revoke(agent: str, tool: str) -> None:
    """Revoke AGENT's grant for TOOL."""
    from orchestrator.agents.grants import revoke_grant

    changed = revoke_grant(_home(), _agent_arg(agent), tool)
    out.print(f"revoked {tool} from {agent}" if changed else f"{agent} held no grant for {tool}")


@grants.command("list")
@click.argument("agent")
def grants_list(agent: str) -> None:
    """List AGENT's active grants."""
    from orchestrator.agents.grants import read_grants

    for tool in sorted(read_grants(_home(), _agent_arg(agent))):
        out.print(tool)


# ------------------------------------------------------------------------ doctor
@main.command()
def doctor() -> None:
    """Check this machine: config, engine, sandbox image; reap orphaned containers."""
    home = _home()
    rows: list[tuple[str, bool, str]] = []

    async def go() -> None:
        async with open_runtime(home) as rt:
            rows.append(("CORRAL_HOME", True, str(home.root)))
            if isinstance(rt.config, ConfigError):
                rows.append(("config.toml", False, str(rt.config)))
            else:
                rows.append(
                    (
                        "config.toml",
                        True,
                        "valid" if home.config_file.exists() else "absent: defaults in force",
                    )
                )
            for path in sorted(home.agents_dir.glob("*/agent.toml")):
                try:
                    load_agent(path)
                    rows.append((f"agent {path.parent.name}", True, "valid"))
                except ConfigError as exc:
                    rows.append((f"agent {path.parent.name}", False, str(exc)))
            sandbox = rt.sandbox_config()
            image = "?" if isinstance(sandbox, ConfigError) else sandbox.image
            runtime = getattr(sandbox, "runtime", "runc")
            rows.extend(await rt.backend.doctor_rows(image, runtime))

    try:
        anyio.run(go)
    except CorralError as exc:
        rows.append(("engine", False, str(exc)))
    table = Table("check", "ok", "detail", title="corral doctor")
    for name, ok, detail in rows:
        table.add_row(name, "[green]yes[/green]" if ok else "[red]NO[/red]", detail)
    out.print(table)
    if not all(ok for _, ok, _ in rows):
        raise SystemExit(1)


@main.command()
def reap() -> None:
    """Remove corral containers whose owning process is gone (never a live owner's)."""

    async def go() -> list[str]:
        async with open_runtime(_home()) as rt:
            removed = await reap_orphans(rt.backend)
            networks = await rt.backend.reap_networks()
            return removed + [f"network {name}" for name in networks]

    removed = anyio.run(go)
    out.print(
        f"removed {len(removed)} orphaned container(s)" + "".join(f"\n  {n}" for n in removed)
    )


if __name__ == "__main__":
    main()
