"""`corral run FILE`: one script in the sandbox, its output streamed, its exit code kept."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import click
from rich.markup import escape

from corral_cli.common import err, fail, out, read_home
from orchestrator.backends.reaper import reap_orphans
from orchestrator.errors import CorralError, ParamError, SandboxBusy, SandboxUnavailable
from orchestrator.runtime import Runtime, open_runtime
from sandboxes.script import ScriptResult, execute_program
from sandboxes.script_policy import TIMEOUT_DEFAULT, ExecuteProgramParams, parse_params

EXIT_TIMEOUT = 124
EXIT_UNAVAILABLE = 125
EXIT_BUSY = 75  # EX_TEMPFAIL: every script slot on this host is taken; try again
EXTENSION_LANGUAGE = {".py": "python", ".sh": "sh", ".bash": "bash"}


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


@click.command()
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
        fail(exc, code=2)
    try:
        code = anyio.run(_run, params, agent)
    except CorralError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        code = 1
    raise SystemExit(code)


async def _run(params: ExecuteProgramParams, agent: str) -> int:
    """The script's exit code, or one of corral's own (EXIT_*)."""
    async with open_runtime(read_home()) as rt:
        await reap_orphans(rt.backend, rt.audit)
        try:
            result = await _execute(rt, params, agent)
        except SandboxUnavailable as exc:
            err.print(f"[red]{escape(str(exc))}[/red]")
            return EXIT_UNAVAILABLE
        except SandboxBusy as exc:
            err.print(f"[yellow]{escape(str(exc))}[/yellow]")
            return EXIT_BUSY
    if result.truncated:
        note = f"[output truncated: {result.returned_bytes} of {result.output_bytes} bytes kept]"
        err.print(f"[yellow]{escape(note)}[/yellow]")
    err.print(f"[dim]{escape(f'[corral: {result.summary()}]')}[/dim]")
    if result.timed_out:
        return EXIT_TIMEOUT
    return result.exit_code if result.exit_code is not None else 1


async def _execute(rt: Runtime, params: ExecuteProgramParams, agent: str) -> ScriptResult:
    ctx = rt.script_context(agent)
    if not out.is_terminal:  # a pipe or a file (CI logs): the bytes as written, nothing else
        return await execute_program(params, ctx, on_output=_stream)
    from corral_cli.run_display import TerminalRun

    with TerminalRun(out, params.timeout_seconds) as shown:
        return await execute_program(params, ctx, on_output=shown.on_output, events=shown)


def _stream(chunk: bytes) -> None:
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()
