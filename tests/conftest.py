"""Shared fixtures. Markers follow the folder: unit / docker (integration) / e2e."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.home import CorralHome

_FOLDER_MARKERS = {"unit": "unit", "integration": "docker", "e2e": "e2e"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.path)).parent.name
        marker = _FOLDER_MARKERS.get(folder)
        if marker is not None and marker not in item.keywords:
            item.add_marker(marker)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def corral_home(tmp_path: Path) -> CorralHome:
    home = CorralHome(root=tmp_path / "corral-home")
    home.ensure()
    return home
