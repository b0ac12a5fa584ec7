"""Benchmark: the prompt cost of tools/list, corral against two reference MCP servers.

Run from the repository root:

    .venv/bin/python bench/tools_list.py [--write docs/benchmarks.md]

Every server is started afresh over stdio and asked for tools/list once, by the 2.x SDK's
`Client(..., mode="legacy")` in .venv. Four rows:

1. corral, a fresh agent (the rendered template: every optional family off);
2. corral, an agent with every optional family turned on in its agent.toml;
3. mcp-server-time (run by .venv-mcp1, local timezone pinned to UTC);
4. mcp-server-git (run by .venv-mcp1) on a throwaway `git init` repository.

The size is the UTF-8 byte length of the compact JSON of the `tools` array, each Tool
serialized as the wire carries it (camelCase aliases, no null fields); "prompt bytes"
counts only what the common clients hand the model of each tool (name, description,
inputSchema): outputSchema, annotations and `_meta` stay with the client. The token
figure is bytes / 4: a rough rule of thumb, not any model's tokenizer.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
from _common import BenchError, markers, run_main, write_section
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rich.console import Console
from rich.table import Table

from orchestrator.config import render_new_agent
from orchestrator.home import CorralHome, Environment

SECTION = "tools_list"
SECTION_START, SECTION_END = markers(SECTION)

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin"
MCP1_BIN = REPO / ".venv-mcp1" / "bin"
CORRAL_BIN = VENV_BIN / "corral"
MCP1_PYTHON = MCP1_BIN / "python"

# Every optional capability family of agent.toml's [capabilities] table.
FAMILIES: tuple[str, ...] = (
    "computer_use",
    "codrive",
    "browser_use",
    "desktop_use",
    "mobile_use",
    "ios_use",
)
AGENT_OFF = "bench-off"
AGENT_ON = "bench-all"
TIME_ZONE = "UTC"
BYTES_PER_TOKEN = 4
TIMEOUT_S = 60.0
# A phone tool is listed only while a device of its kind is configured (listing connects to
# none): one of each, so the every-family row lists every tool.
PHONES_CONFIGURED = (
    '[rigs.android]\ndevices = ["emulator-5554"]\n\n[rigs.ios]\nwda_url = "http://127.0.0.1:8100"\n'
)
REFERENCE_PACKAGES: tuple[str, ...] = ("mcp-server-time", "mcp-server-git", "mcp")

console = Console()


@dataclass(frozen=True, slots=True)
class Server:
    label: str
    params: StdioServerParameters


@dataclass(frozen=True, slots=True)
class Measurement:
    label: str
    tool_names: tuple[str, ...]
    size_bytes: int
    prompt_bytes: int
    server_info: str

    @property
    def tools(self) -> int:
        return len(self.tool_names)

    @property
    def tokens(self) -> int:
        return round(self.size_bytes / BYTES_PER_TOKEN)

    @property
    def bytes_per_tool(self) -> float:
        return self.size_bytes / self.tools if self.tools else 0.0


# --- the servers ----------------------------------------------------------------------


def require_file(path: Path, hint: str) -> str:
    if not path.exists():
        raise BenchError(f"{path} does not exist; {hint}")
    return str(path)


def all_families_on(text: str) -> str:
    """The rendered agent.toml with every optional family set to true (each must be there)."""
    lines = text.splitlines()
    for family in FAMILIES:
        hits = [i for i, line in enumerate(lines) if line.split("=")[0].strip() == family]
        if len(hits) != 1 or "=" not in lines[hits[0]]:
            raise BenchError(f"the agent template has {len(hits)} `{family} = ...` lines, not 1")
        lines[hits[0]] = f"{family} = true"
    return "\n".join(lines) + "\n"


def write_agent(home: CorralHome, name: str, text: str) -> None:
    path = home.agent_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def corral_server(label: str, home: CorralHome, agent: str) -> Server:
    env = dict(os.environ)
    env["CORRAL_HOME"] = str(home.root)
    command = require_file(CORRAL_BIN, "install the project into .venv first")
    params = StdioServerParameters(command=command, args=["mcp", "--agent", agent], env=env)
    return Server(label, params)


def reference_server(label: str, module: str, *args: str) -> Server:
    python = require_file(MCP1_PYTHON, "create .venv-mcp1 with the reference servers first")
    return Server(label, StdioServerParameters(command=python, args=["-m", module, *args]))


def init_git_repo(path: Path) -> None:
    git = shutil.which("git")
    if git is None:
        raise BenchError("git is not on PATH (mcp-server-git needs a repository)")
    done = subprocess.run(
        [git, "init", "--quiet", str(path)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BenchError(f"`git init {path}` failed: {done.stderr.strip()}")


# --- measuring ------------------------------------------------------------------------


PROMPT_FIELDS = ("name", "description", "inputSchema")


def wire_size(tools: Sequence[Mapping[str, Any]]) -> int:
    return len(json.dumps(list(tools), separators=(",", ":")).encode())


def prompt_size(tools: Sequence[Mapping[str, Any]]) -> int:
    """What a client puts in the model's prompt of each tool: its name, description and
    input schema (Claude's and OpenAI's tool definitions carry nothing else)."""
    return wire_size([{k: tool[k] for k in PROMPT_FIELDS if k in tool} for tool in tools])


async def measure(server: Server) -> Measurement:
    tools: list[dict[str, Any]] = []
    names: list[str] = []
    with anyio.fail_after(TIMEOUT_S):
        async with Client(server.params, mode="legacy") as client:
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="bypass")
                for tool in page.tools:
                    names.append(tool.name)
                    tools.append(tool.model_dump(by_alias=True, exclude_none=True, mode="json"))
                cursor = page.next_cursor
                if cursor is None:
                    break
            info = client.server_info
    if not tools:
        raise BenchError(f"{server.label}: tools/list returned no tools")
    described = f"{info.name} {info.version}" if info is not None else "unknown"
    return Measurement(server.label, tuple(names), wire_size(tools), prompt_size(tools), described)


async def measure_all(servers: Sequence[Server]) -> list[Measurement]:
    results: list[Measurement] = []
    for server in servers:
        console.print(f"[dim]tools/list from {server.label}...[/dim]")
        try:
            results.append(await measure(server))
        except BenchError:
            raise
        except Exception as exc:
            raise BenchError(f"{server.label}: {type(exc).__name__}: {exc}") from exc
    return results


def run_benchmark() -> list[Measurement]:
    with (
        tempfile.TemporaryDirectory(prefix="corral-bench-home-") as home_dir,
        tempfile.TemporaryDirectory(prefix="corral-bench-git-") as git_dir,
    ):
        home = CorralHome(Path(home_dir).resolve(), env=Environment.from_environ(os.environ))
        write_agent(home, AGENT_OFF, render_new_agent(AGENT_OFF))
        write_agent(home, AGENT_ON, all_families_on(render_new_agent(AGENT_ON)))
        home.config_file.write_text(PHONES_CONFIGURED, encoding="utf-8")
        repo = Path(git_dir).resolve()
        init_git_repo(repo)
        servers = [
            corral_server("corral (fresh agent)", home, AGENT_OFF),
            corral_server("corral (every family on)", home, AGENT_ON),
            reference_server("mcp-server-time", "mcp_server_time", "--local-timezone", TIME_ZONE),
            reference_server("mcp-server-git", "mcp_server_git", "--repository", str(repo)),
        ]
        return anyio.run(measure_all, servers)


def reference_versions() -> dict[str, str]:
    """Versions of the reference packages as installed in .venv-mcp1 (asked of that venv)."""
    python = require_file(MCP1_PYTHON, "create .venv-mcp1 with the reference servers first")
    script = (
        "import importlib.metadata as m, json, sys; "
        "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    )
    done = subprocess.run(
        [python, "-c", script, *REFERENCE_PACKAGES], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise BenchError(f"cannot read versions from .venv-mcp1: {done.stderr.strip()}")
    versions: dict[str, str] = json.loads(done.stdout)
    return versions


def local_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


# --- reporting ------------------------------------------------------------------------

HEADERS = ("server", "tools", "bytes", "~tokens", "bytes/tool", "prompt bytes", "~prompt tokens")


def table_rows(results: Sequence[Measurement]) -> list[list[str]]:
    return [
        [
            r.label,
            str(r.tools),
            str(r.size_bytes),
            str(r.tokens),
            f"{r.bytes_per_tool:.0f}",
            str(r.prompt_bytes),
            str(round(r.prompt_bytes / BYTES_PER_TOKEN)),
        ]
        for r in results
    ]


def print_report(results: Sequence[Measurement]) -> None:
    table = Table(title="tools/list prompt cost")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i == 0 else "right")
    for row in table_rows(results):
        table.add_row(*row)
    console.print()
    console.print(table)
    console.print(
        "[dim]bytes: compact JSON of the tools array, UTF-8; ~tokens = bytes / "
        f"{BYTES_PER_TOKEN}, a rough rule of thumb, not a tokenizer.[/dim]"
    )
    for r in results:
        console.print(f"[dim]{r.label} ({r.server_info}): {', '.join(r.tool_names)}[/dim]")


def markdown_table(results: Sequence[Measurement]) -> str:
    lines = [
        "| " + " | ".join(HEADERS) + " |",
        "|---|" + "---:|" * (len(HEADERS) - 1),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(results)]
    return "\n".join(lines)


def markdown_section(
    results: Sequence[Measurement], versions: Mapping[str, str], command: str
) -> str:
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    families = ", ".join(f"`{f}`" for f in FAMILIES)
    return f"""{SECTION_START}
## tools/list: prompt cost of the tool listing

What a server's tools cost: the size of the `tools` array of one tools/list answer (what
the wire carries), and of the part of it the common clients put in the model's prompt.
Each `Tool` is serialized as on the wire
(`model_dump(by_alias=True, exclude_none=True, mode="json")`), the array dumped as compact
JSON (`separators=(",", ":")`) and its UTF-8 bytes counted. "~tokens" is bytes / {BYTES_PER_TOKEN},
a rough rule of thumb for English and JSON, not any model's tokenizer. "prompt bytes" counts
only what the common clients hand the model of each tool (`name`, `description`,
`inputSchema`; Claude's and OpenAI's tool definitions carry nothing else): a tool's
`outputSchema` (corral lists one for every tool, docs/tools.md), annotations and `_meta`
stay with the client.

Every server is started afresh over stdio and reached by the MCP Python SDK
{local_version("mcp")} client (`Client(..., mode="legacy")`):

- **corral (fresh agent)**: `corral mcp --agent NAME` (corral {local_version("corral")}) on a
  throwaway `CORRAL_HOME`, the agent being the rendered template (every optional family off).
- **corral (every family on)**: the same, with every optional family set to `true` in its
  `agent.toml`: {families}; its `config.toml` names one Android device and
  one WebDriverAgent (the phone tools are listed only then; listing connects to neither).
- **mcp-server-time** {versions["mcp-server-time"]}: `python -m mcp_server_time
  --local-timezone {TIME_ZONE}` (its descriptions embed the local timezone's name, so it is
  pinned for repeatable figures).
- **mcp-server-git** {versions["mcp-server-git"]}: `python -m mcp_server_git --repository DIR`,
  `DIR` a fresh `git init` repository.

The two reference servers are the official ones from PyPI, run from a separate venv with the
1.x MCP SDK ({versions["mcp"]}).

Command (from the repository root):

```sh
{command}
```

Run on {date}.

{markdown_table(results)}
{SECTION_END}"""


# --- main -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--write", metavar="PATH", help="write/replace the results section in this markdown file"
    )
    return parser.parse_args(argv)


def canonical_command(write: str | None) -> str:
    argv = [".venv/bin/python", "bench/tools_list.py"]
    if write is not None:
        argv += ["--write", write]
    return shlex.join(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    versions = reference_versions()
    results = run_benchmark()
    print_report(results)
    if args.write is not None:
        section = markdown_section(results, versions, canonical_command(args.write))
        write_section(Path(args.write), "tools_list", section)
        console.print(f"wrote the section to {args.write}")
    return 0


if __name__ == "__main__":
    run_main(main, console)
