"""`corral images build` (corral's images, built locally) and `corral images push` (for a
Kubernetes cluster to pull)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from corral_cli.common import err, fail, out, read_home
from orchestrator.backends.docker.backend import DEFAULT_SOCKET
from orchestrator.backends.docker.image_push import config_snippet, push_plan, push_to_registry
from orchestrator.config import CorralConfig, load_config
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
    import docker

    from orchestrator.backends.docker.backend import API_VERSION, engine_url, map_docker_errors
    from orchestrator.backends.docker.images import build_sandbox

    home = read_home()
    try:
        config = load_config(home.config_file, home.env.image_tag)
        url = engine_url(config.container.docker_host, {"DOCKER_HOST": home.env.docker_host or ""})
        with err.status("building images…") as status, map_docker_errors(url):
            client = docker.DockerClient(base_url=url, version=API_VERSION)

            def say(line: str) -> None:
                status.update(line[:100])
                err.print(f"  {line}", markup=False)

            sandbox = config.container.sandbox
            outcome = build_sandbox(
                client,
                image=sandbox.image,
                base_image=sandbox.base_image,
                say=say,
                rebuild=rebuild,
                pull_base=pull_base,
                mirror=mirror,
            )
            _build_rigs(client, config, say, rebuild=rebuild)
    except CorralError as exc:
        fail(exc)
    verb = "built" if outcome.built else "cached"
    err.print(f"[green]{outcome.image}: {verb}[/green]")


def _build_rigs(
    client: Any, config: CorralConfig, say: Callable[[str], None], *, rebuild: bool
) -> None:
    """Every rig image whose recipe is in rig_images/, on the sandbox's base image."""
    from orchestrator.backends.docker.images import build_recipe, rig_dockerfile

    base_image = config.container.sandbox.base_image
    base = client.images.get(base_image)
    kiosk, rigs = config.container.kiosk, config.container.rigs
    for rig, tag in (
        ("kiosk", kiosk.image),
        ("proxy", kiosk.proxy_image),
        ("browser", rigs.browser_image),
        ("desktop", rigs.desktop_image),
    ):
        if rig_dockerfile(rig).exists():
            build_recipe(
                client,
                image=tag,
                dockerfile=rig_dockerfile(rig),
                base_image=base_image,
                base_id=base.id or "",
                say=say,
                rebuild=rebuild,
            )


@images.command("push")
@click.argument("registry")
def images_push(registry: str) -> None:
    """Tag the sandbox, kiosk and proxy images as REGISTRY/NAME:TAG and push them, for a
    Kubernetes cluster to pull (docs/kubernetes.md)."""
    home = read_home()
    try:
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
        fail(exc, code=2)
    except CorralError as exc:
        fail(exc)
    out.print("pushed; put this in config.toml:\n" + config_snippet(steps), markup=False)
