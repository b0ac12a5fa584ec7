"""Writing one benchmark's section into docs/benchmarks.md, shared by every bench script."""

from __future__ import annotations

import os
from pathlib import Path

INTRO = (
    "# Benchmarks\n\n"
    "Figures here are from one run on a {nproc}-core machine; absolute times vary between "
    "machines and runs, so compare ratios within a run.\n"
)


class SectionError(Exception):
    """The markers of a section are unbalanced in the target file."""


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"


def write_section(path: Path, name: str, section: str) -> None:
    """Replace section `name` of `path` (delimited by its markers) or append it; keep the rest.

    `section` must itself start and end with the markers from `markers(name)`.
    """
    start_marker, end_marker = markers(name)
    text = (
        path.read_text(encoding="utf-8")
        if path.exists()
        else INTRO.format(nproc=os.cpu_count() or "?")
    )
    starts, ends = text.count(start_marker), text.count(end_marker)
    start, end = text.find(start_marker), text.find(end_marker)
    if starts == 0 and ends == 0:
        new = text.rstrip("\n") + "\n\n" + section + "\n"
    elif starts == 1 and ends == 1 and end > start:
        new = text[:start] + section + text[end + len(end_marker) :]
    else:
        raise SectionError(f"{path}: the markers of section {name!r} are unbalanced; fix by hand")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(new, encoding="utf-8")
    os.replace(tmp, path)
