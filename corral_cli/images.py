"""`corral images build` (corral's images, built locally) and `corral images push` (for a
Kubernetes cluster to pull)."""

from __future__ import annotations

import click

from corral_cli.common import err, fail, out, read_home
from orchestrator.backends.docker.image_push import config_snippet, push_plan, push_to_registry
from orchestrator.backends.docker.sdk import DEFAULT_SOCKET
from orchestrator.config import load_config
from orchestrator.errors import CorralError


@click.group()
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

    home = read_home()
    try:
        config = load_config(home.config_file, home.env.image_tag)
        with err.status("building images…") as status:

            def say(line: str) -> None:
                status.update(line[:100])
                err.print(f"  {line}", markup=False)

            outcome = build_all(
                config.container,
                say,
                rebuild=rebuild,
                pull_base=pull_base,
                mirror=mirror,
                docker_host=config.container.docker_host or home.env.docker_host or DEFAULT_SOCKET,
            )
    except CorralError as exc:
        fail(exc)
    verb = "built" if outcome.built else "cached"
    err.print(f"[green]{outcome.image}: {verb}[/green]")


@images.command("push")
@click.argument("registry")
def images_push(registry: str) -> None:
    """Tag the sandbox, kiosk, proxy, browser and desktop images as REGISTRY/NAME:TAG and
    push them, for a Kubernetes cluster to pull (docs/kubernetes.md)."""
    home = read_home()
    try:
        config = load_config(home.config_file, home.env.image_tag)
        container = config.container
        images = [
            container.sandbox.image,
            container.kiosk.image,
            container.kiosk.proxy_image,
            container.rigs.browser_image,
            container.rigs.desktop_image,
        ]
        steps = push_plan(registry, images)
        push_to_registry(
            container.docker_host or home.env.docker_host or DEFAULT_SOCKET,
            steps,
            lambda line: err.print(f"  {line}", markup=False),
        )
    except ValueError as exc:
        fail(exc, code=2)
    except CorralError as exc:
        fail(exc)
    out.print("pushed; put this in config.toml:\n" + config_snippet(steps), markup=False)
