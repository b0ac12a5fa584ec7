"""CORRAL_HOME: where corral keeps its files (default ~/.corral, never touched here), and the
rest of the environment the CLI reads once into it."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.config import load_config
from orchestrator.home import CorralHome, Environment

pytestmark = pytest.mark.unit


def test_corral_home_comes_from_the_environment_variable(tmp_path: Path) -> None:
    home = CorralHome.from_env({"CORRAL_HOME": str(tmp_path / "h")})

    assert home.root == (tmp_path / "h").resolve()


def test_without_corral_home_the_default_is_dot_corral_in_the_home_directory() -> None:
    assert CorralHome.from_env({}).root == (Path.home() / ".corral").resolve()


def test_an_empty_corral_home_means_the_default() -> None:
    assert CorralHome.from_env({"CORRAL_HOME": ""}) == CorralHome.from_env({})


def test_a_relative_corral_home_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    home = CorralHome.from_env({"CORRAL_HOME": "rel/home"})

    assert home.root.is_absolute()
    assert home.root == (tmp_path / "rel" / "home").resolve()


def test_the_files_live_where_the_spec_says(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path)

    assert home.config_file == tmp_path / "config.toml"
    assert home.agent_file("alice") == tmp_path / "agents" / "alice" / "agent.toml"
    assert home.audit_file == tmp_path / "audit.jsonl"
    assert home.work_dir.parent == tmp_path


def test_ensure_creates_private_directories(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path / "new" / "home")

    home.ensure()

    for directory in (home.root, home.agents_dir, home.work_dir):
        assert directory.is_dir()
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_ensure_is_idempotent(tmp_path: Path) -> None:
    home = CorralHome(root=tmp_path / "h")
    home.ensure()
    (home.agents_dir / "keep.txt").write_text("x")

    home.ensure()

    assert (home.agents_dir / "keep.txt").read_text() == "x"


# ------------------------------------------------------------------ the environment


def test_the_cli_reads_the_image_tag_engine_and_kubeconfig_once_into_the_home() -> None:
    environ = {
        "CORRAL_HOME": "/tmp/h",
        "CORRAL_IMAGE_TAG": "wt-2",
        "DOCKER_HOST": "tcp://127.0.0.1:2375",
        "KUBECONFIG": "/k/config",
        "HOME": "/home/ann",
    }

    env = CorralHome.from_env(environ).env

    assert env == Environment("wt-2", "tcp://127.0.0.1:2375", "/k/config", "/home/ann")
    assert env.kube_environ() == {"KUBECONFIG": "/k/config", "HOME": "/home/ann"}


def test_without_corral_image_tag_the_images_are_latest() -> None:
    assert CorralHome.from_env({}).env.image_tag == "latest"


def test_a_corral_image_tag_that_is_not_a_docker_tag_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="CORRAL_IMAGE_TAG='a b' is not a Docker tag"):
        CorralHome.from_env({"CORRAL_IMAGE_TAG": "a b"})


def test_the_image_tag_names_every_image_config_toml_leaves_unset(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[container.kiosk]\nimage = "registry.example/kiosk:v1"\n')

    config = load_config(path, image_tag="wt-2")

    assert config.container.sandbox.image == "corral-sandbox:wt-2"
    assert config.container.kiosk.image == "registry.example/kiosk:v1"
    assert config.container.kiosk.proxy_image == "corral-proxy:wt-2"
    assert config.container.rigs.browser_image == "corral-browser:wt-2"
    assert config.container.rigs.desktop_image == "corral-desktop:wt-2"
    assert load_config(tmp_path / "absent.toml", "wt-2").container.sandbox.image == (
        "corral-sandbox:wt-2"
    )


def test_nothing_below_the_cli_reads_the_environment_at_import() -> None:
    code = (
        "import os, sys, pkgutil, importlib\n"
        "os.environ['CORRAL_IMAGE_TAG'] = 'not a tag'\n"
        "import orchestrator, mcp_front, sandboxes\n"
        "for pkg in (orchestrator, mcp_front, sandboxes):\n"
        "    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "from orchestrator.config import DEFAULT_SANDBOX_IMAGE\n"
        "print(DEFAULT_SANDBOX_IMAGE)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "corral-sandbox:latest"
