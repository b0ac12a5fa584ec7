"""What `corral images build` sends as a rig image's build context."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.backends.docker.images import recipe_files, rig_dockerfile

pytestmark = pytest.mark.unit


def test_a_rig_context_holds_its_subfolders_but_no_caches_or_hidden_files(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "Dockerfile").write_text("FROM x\nCOPY pkg /opt/pkg\n")
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / ".hidden").write_text("no")

    assert sorted(recipe_files(tmp_path / "Dockerfile")) == ["Dockerfile", "pkg/mod.py"]


def test_the_kiosk_context_carries_the_agent_package() -> None:
    files = recipe_files(rig_dockerfile("kiosk"))

    assert "kiosk_agent/__main__.py" in files
    assert "seccomp.json" in files
    assert not any("__pycache__" in name for name in files)


def test_the_sandbox_recipe_is_its_dockerfile_alone() -> None:
    dockerfile = Path(__file__).resolve().parents[2] / "Dockerfile.sandbox"

    assert list(recipe_files(dockerfile)) == ["Dockerfile"]


def test_the_desktop_recipe_carries_the_kiosk_agents_modules_without_a_copy() -> None:
    files = recipe_files(rig_dockerfile("desktop"))

    assert "desktop_agent.py" in files and "Dockerfile" in files
    for module in ("xinput.py", "screen.py", "xserver.py", "vnc.py", "common.py"):
        kiosk = (rig_dockerfile("kiosk").parent / "kiosk_agent" / module).read_bytes()
        assert files[f"kiosk_agent/{module}"] == kiosk
    assert not (rig_dockerfile("desktop").parent / "kiosk_agent").exists()
