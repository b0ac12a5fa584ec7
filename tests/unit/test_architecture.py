"""The shape of the code, checked: imports run one way, no module over 400 lines and no
function over 60 (each exception listed once, with its reason), one exception tree drawn
where it is documented. Read from the source (ast), so a check
fails the moment someone adds an import that runs back up."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import orchestrator.errors
from sandboxes.errors import CorralError
from tests.conftest import FOLDERS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
# Lower layers first: a module may import its own layer or a lower one, never a higher one.
# The CLI sits above them all: it starts the MCP server and the gateway.
LAYERS = ("sandboxes", "orchestrator", "mcp_front", "corral_cli")
# orchestrator's rooms, lowest first (docs/architecture.md draws them). A module may import
# its own room or a lower one. The first room is the root's own modules.
ROOMS: tuple[tuple[str, ...], ...] = (
    ("errors", "home", "config", "audit"),  # the root: what every room may use
    ("agents",),
    ("backends",),
    ("ledger",),
    ("pools",),
    ("runtime",),
    ("recordings",),
    ("people",),
    ("surfaces",),
    ("codrive",),
    ("gateway",),
)
# Imports that still run up a room, each with its reason; the test fails once one goes.
KNOWN_UPWARD: dict[str, str] = {}
PRODUCT_DIRS = (*LAYERS, "rig_images")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60  # end_lineno - lineno + 1 of the def, decorators not counted
# Every module (`path`) or function (`path::Qualified.name`) allowed over the limits, with
# why. The only list: the test fails on a new offender and on an entry no longer needed.
SIZE_EXCEPTIONS: dict[str, str] = {}


def _modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every absolute import in `path`, nested ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def upward_imports(root: Path = REPO) -> list[str]:
    problems = []
    for rank, package in enumerate(LAYERS):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for line, module in _imports(path):
                top = module.split(".")[0]
                if top in LAYERS and LAYERS.index(top) > rank:
                    problems.append(f"{rel}:{line} imports {top} (a higher layer)")
    return problems


def room_of(parts: tuple[str, ...]) -> int | None:
    """The rank of orchestrator's room that holds module `parts` (None: not orchestrator's)."""
    if len(parts) < 2 or parts[0] != "orchestrator":
        return None
    for rank, names in enumerate(ROOMS):
        if parts[1] in names:
            return rank
    raise AssertionError(f"{'.'.join(parts)} is in no room: add it to ROOMS")


def upward_room_imports(root: Path = REPO) -> list[str]:
    problems = []
    for path in sorted((root / "orchestrator").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mine = room_of(parts)
        if mine is None:
            continue
        for _, module in _imports(path):
            theirs = room_of(tuple(module.split(".")))
            if theirs is not None and theirs > mine:
                problems.append(f"{path.relative_to(root).as_posix()} imports {module}")
    return problems


def test_imports_run_one_way_cli_then_mcp_front_then_orchestrator_then_sandboxes() -> None:
    assert upward_imports() == []


def test_orchestrator_rooms_import_one_way_and_every_exception_is_still_needed() -> None:
    assert sorted(set(upward_room_imports())) == sorted(KNOWN_UPWARD)


def test_the_import_check_catches_an_import_that_runs_back_up(tmp_path: Path) -> None:
    for package in LAYERS:
        (tmp_path / package).mkdir()
    (tmp_path / "sandboxes" / "policy.py").write_text(
        "def f() -> None:\n    from orchestrator.config import load_config\n"
    )
    (tmp_path / "orchestrator" / "x.py").write_text("import mcp_front.server\n")
    (tmp_path / "mcp_front" / "ok.py").write_text("from sandboxes import catalogue\n")
    (tmp_path / "corral_cli" / "main.py").write_text("from mcp_front.server import serve\n")

    assert upward_imports(tmp_path) == [
        "sandboxes/policy.py:2 imports orchestrator (a higher layer)",
        "orchestrator/x.py:1 imports mcp_front (a higher layer)",
    ]


def test_the_room_check_catches_a_room_that_reaches_up(tmp_path: Path) -> None:
    (tmp_path / "orchestrator" / "people").mkdir(parents=True)
    (tmp_path / "orchestrator" / "people" / "seats.py").write_text(
        "from orchestrator.surfaces.kiosk import KioskSession\nfrom orchestrator.audit import A\n"
    )
    (tmp_path / "orchestrator" / "gateway").mkdir()
    (tmp_path / "orchestrator" / "gateway" / "app.py").write_text("import orchestrator.people\n")

    assert upward_room_imports(tmp_path) == [
        "orchestrator/people/seats.py imports orchestrator.surfaces.kiosk"
    ]


# The engine seam (issue 21): each engine's SDK only inside its backend, and the Docker
# backend's class and module only inside its own package (everything else holds a
# `sandboxes.ports.ContainerBackend`). Product code only: tests and bench drive engines.
SDK_HOMES = {"docker": "orchestrator/backends/docker/", "kr8s": "orchestrator/backends/kubernetes/"}
DOCKER_BACKEND_MODULE = "orchestrator.backends.docker.backend"
SEAM_DIRS = (*LAYERS, "rig_images")


def _imported_names(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names imported from it) of every absolute import in `path`."""
    found: list[tuple[int, str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, tuple(a.name for a in node.names)))
    return found


def engine_seam_breaches(root: Path = REPO) -> list[str]:
    problems = []
    for package in SEAM_DIRS:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for line, module, names in _imported_names(path):
                top = module.split(".")[0]
                if top in SDK_HOMES and not rel.startswith(SDK_HOMES[top]):
                    problems.append(f"{rel}:{line} imports {top}")
                if rel.startswith(SDK_HOMES["docker"]):
                    continue
                reaches = (
                    module == DOCKER_BACKEND_MODULE
                    or (module == "orchestrator.backends.docker" and "backend" in names)
                    or "DockerBackend" in names
                )
                if reaches:
                    problems.append(f"{rel}:{line} imports the Docker backend")
    return problems


def test_only_each_backend_imports_its_engine_and_nothing_else_the_docker_backend() -> None:
    assert engine_seam_breaches() == []


def test_the_seam_check_catches_an_sdk_or_the_docker_backend_imported_outside(
    tmp_path: Path,
) -> None:
    for folder in ("sandboxes", "orchestrator/pools", "orchestrator/backends/docker", "corral_cli"):
        (tmp_path / folder).mkdir(parents=True)
    for package in SEAM_DIRS:
        (tmp_path / package).mkdir(exist_ok=True)
    (tmp_path / "corral_cli" / "main.py").write_text("def build() -> None:\n    import docker\n")
    (tmp_path / "orchestrator" / "pools" / "ready.py").write_text(
        "from orchestrator.backends.docker.backend import DockerBackend\n"
        "from orchestrator.backends.docker import backend\n"
        "import kr8s.asyncio\n"
        "from sandboxes.ports import ContainerBackend\n"
    )
    (tmp_path / "orchestrator" / "backends" / "docker" / "egress.py").write_text(
        "import docker.errors\nfrom orchestrator.backends.docker.backend import DockerBackend\n"
    )
    (tmp_path / "sandboxes" / "ports.py").write_text("from typing import Protocol\n")

    assert engine_seam_breaches(tmp_path) == [
        "orchestrator/pools/ready.py:1 imports the Docker backend",
        "orchestrator/pools/ready.py:2 imports the Docker backend",
        "orchestrator/pools/ready.py:3 imports kr8s",
        "corral_cli/main.py:2 imports docker",
    ]


def test_only_the_cli_starts_the_mcp_server() -> None:
    starters = [
        path.relative_to(REPO).as_posix()
        for package in ("orchestrator", "sandboxes", "corral_cli")
        for path in _modules(package)
        if "mcp_front.server" in path.read_text()
    ]
    assert starters and all(path.startswith("corral_cli/") for path in starters)


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def oversized(root: Path, packages: tuple[str, ...]) -> dict[str, int]:
    """Every module over MAX_MODULE_LINES (`path`) and function over MAX_FUNCTION_LINES
    (`path::qualname`) under `root`, with its length."""
    found: dict[str, int] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            text = path.read_text()
            if (n := len(text.splitlines())) > MAX_MODULE_LINES:
                found[rel] = n
            for name, lines in _functions(ast.parse(text, filename=rel)):
                if lines > MAX_FUNCTION_LINES:
                    found[f"{rel}::{name}"] = max(lines, found.get(f"{rel}::{name}", 0))
    return found


def size_problems(found: dict[str, int], exceptions: dict[str, str]) -> list[str]:
    over = [f"{key}: {n} lines" for key, n in sorted(found.items()) if key not in exceptions]
    stale = [f"{key}: within the limits now (or gone); drop it" for key in exceptions]
    return over + [line for line, key in zip(stale, exceptions, strict=True) if key not in found]


def test_no_module_over_400_lines_no_function_over_60_and_every_exception_needed() -> None:
    assert size_problems(oversized(REPO, PRODUCT_DIRS), SIZE_EXCEPTIONS) == []


def test_the_size_check_finds_long_modules_and_functions_and_stale_exceptions(
    tmp_path: Path,
) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    (pkg / "ok.py").write_text(f"@decorated\ndef fits():\n{body}\n")
    long_body = textwrap.indent(f"{body}\n    return x0\n    def inner():\n        pass", "    ")
    (pkg / "a.py").write_text(f"class C:\n    async def long(self):\n{long_body}\n")
    (pkg / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))

    found = oversized(tmp_path, ("pkg",))

    assert found == {"pkg/a.py::C.long": MAX_FUNCTION_LINES + 3, "pkg/big.py": 401}
    problems = size_problems(found, {"pkg/big.py": "why", "pkg/ok.py::fits": "why"})
    assert problems == [
        f"pkg/a.py::C.long: {MAX_FUNCTION_LINES + 3} lines",
        "pkg/ok.py::fits: within the limits now (or gone); drop it",
    ]


def _all_corral_errors() -> set[type[BaseException]]:
    for package in LAYERS:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            importlib.import_module(info.name)
    found: set[type[BaseException]] = set()
    pending: list[type[BaseException]] = [CorralError]
    while pending:
        cls = pending.pop()
        found.add(cls)
        pending += cls.__subclasses__()
    return found


def test_every_corral_error_is_drawn_in_the_tree_and_defined_in_an_errors_module() -> None:
    drawing = inspect.getdoc(orchestrator.errors) or ""
    errors = _all_corral_errors()

    assert len(errors) > 10
    assert {cls.__name__ for cls in errors if cls.__name__ not in drawing} == set()
    assert {
        f"{cls.__module__}.{cls.__name__}"
        for cls in errors
        if cls.__module__ not in ("sandboxes.errors", "orchestrator.errors")
    } == set()


def test_param_error_is_a_corral_error() -> None:
    assert issubclass(orchestrator.errors.ParamError, CorralError)


MARK_REPORT = """
import pytest

def pytest_collection_finish(session):
    for item in session.items:
        marks = sorted(
            m for m in ("unit", "integration", "e2e", "faults") if item.get_closest_marker(m)
        )
        print("MARKS\t" + item.nodeid + "\t" + ",".join(marks))
"""


def test_each_marker_selects_exactly_its_folder(tmp_path: Path) -> None:
    """`pytest -m e2e` once selected nothing: the folder name is already a keyword."""
    import os
    import subprocess
    import sys

    (tmp_path / "markreport.py").write_text(MARK_REPORT)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "markreport",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [line.split("\t")[1:] for line in done.stdout.splitlines() if line.startswith("MARKS\t")]
    seen = {folder: 0 for folder in FOLDERS}
    for node, marks in rows:
        folder = node.split("/")[1]
        assert marks == folder, f"{node} carries {marks!r}, not {folder!r}"
        seen[folder] += 1
    assert all(count > 0 for count in seen.values()), seen
