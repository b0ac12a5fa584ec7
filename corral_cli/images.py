"""`corral images push`: the CLI side of pushing images for a Kubernetes cluster."""

from __future__ import annotations

import click

from orchestrator.backends.docker.backend import DEFAULT_SOCKET
from orchestrator.backends.docker.image_push import config_snippet, push_plan, push_to_registry
from orchestrator.errors import CorralError


@click.command("push")
@click.argument("registry")
def images_push(registry: str) -> None:
    """Tag the sandbox, kiosk and proxy images as REGISTRY/NAME:TAG and push them, for a
    Kubernetes cluster to pull (docs/kubernetes.md)."""
    from corral_cli.main import _home, err, out
    from orchestrator.config import load_config

    try:
        home = _home()
        config = load_config(home.config_file, home.env.image_tag)
        container = config.container
        steps = push_plan(
            registry, [container.sandbox.image, container.kiosk.image, container.kiosk.proxy_image]
        )
        push_to_registry(
            container.docker_host or home.env.docker_host or DEFAULT_SOCKET,
            steps,
            lambda line: err.print(f"  {line}", markup=False),
        )
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise SystemExit(2) from exc
    except CorralError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise SystemExit(1) from exc
    out.print("pushed; put this in config.toml:\n" + config_snippet(steps), markup=False)
