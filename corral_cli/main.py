"""The `corral` command line: the group and where each command lives. The environment is
read in one place, `corral_cli.common.read_home`.

Each command's module is imported when that command runs, not before: `corral mcp` starts
once per conversation and `corral approvals approve` is typed by a person waiting on it,
so neither pays for the imports of the others (the Docker SDK, the gateway, the image
builder). `corral --help` imports them all to list them."""

from __future__ import annotations

import importlib

import click

from corral_cli.common import err, out, read_home

__all__ = ["COMMANDS", "err", "main", "out", "read_home"]

# Command name -> "module:attribute" of its click command, in the order `--help` lists them.
COMMANDS = {
    "run": "corral_cli.run:run",
    "images": "corral_cli.images:images",
    "agents": "corral_cli.agents:agents",
    "mcp": "corral_cli.serve:mcp",
    "gateway": "corral_cli.gateway:gateway",
    "operators": "corral_cli.people:operators",
    "approvals": "corral_cli.people:approvals",
    "sessions": "corral_cli.people:sessions",
    "recordings": "corral_cli.recordings:recordings",
    "grants": "corral_cli.agents:grants",
    "doctor": "corral_cli.doctor:doctor",
    "reap": "corral_cli.doctor:reap",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (COMMANDS)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, _, attribute = where.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), where
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="corral")
def main() -> None:
    """corral: sandboxed execution for AI employees."""


if __name__ == "__main__":
    main()
