"""The `corral` command line: the group and where each command lives. The environment is
read in one place, `corral_cli.common.read_home`."""

from __future__ import annotations

import click

from corral_cli.agents import agents, grants
from corral_cli.common import err, out, read_home
from corral_cli.doctor import doctor, reap
from corral_cli.gateway import console_hint, gateway
from corral_cli.images import images
from corral_cli.people import COMMANDS as PEOPLE_COMMANDS
from corral_cli.run import infer_language, run
from corral_cli.serve import mcp

__all__ = ["console_hint", "err", "infer_language", "main", "out", "read_home"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="corral")
def main() -> None:
    """corral: sandboxed execution for AI employees."""


for command in (run, images, agents, mcp, gateway, *PEOPLE_COMMANDS, grants, doctor, reap):
    main.add_command(command)


if __name__ == "__main__":
    main()
