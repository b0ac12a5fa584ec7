"""`corral run` as a person sees it (issue 16): in a terminal (a real pty) a status line
shows the phase and the elapsed time while the script's output is printed above it, in
order; in a pipe (CI logs) nothing but the script's bytes and the one summary line."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.home import CorralHome
from tests.integration.conftest import corral_bin, env_with_home

pytestmark = pytest.mark.integration

TICKS = """
import sys, time
for n in range(3):
    print(f"tick {n}", flush=True)
    time.sleep(0.4)
print("to stderr", file=sys.stderr, flush=True)
sys.exit(3)
"""
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_in_pty(argv: list[str], env: dict[str, str], limit: float = 120) -> tuple[int, str]:
    """Run `argv` with a pty as its terminal; its exit code and everything it drew."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**env, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"},
        close_fds=True,
    )
    os.close(slave)
    drawn = bytearray()
    deadline = time.monotonic() + limit
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # the other side closed: the process is gone
                break
            if not data:
                break
            drawn += data
    finally:
        os.close(master)
        code = proc.wait(timeout=30)
    return code, drawn.decode(errors="replace")


def test_in_a_terminal_corral_run_shows_its_phases_then_the_output_in_order(
    corral_home: CorralHome, tmp_path: Path
) -> None:
    script = tmp_path / "ticks.py"
    script.write_text(TICKS)

    code, drawn = run_in_pty([corral_bin(), "run", str(script)], env_with_home(corral_home))

    assert code == 3
    text = ANSI.sub("", drawn).replace("\r\n", "\n")
    assert "starting the script sandbox · " in text  # the first phase, drawn at once
    assert re.search(r"running · \d+\.\d s of 30 s", text)
    positions = [text.index(line) for line in ("tick 0\n", "tick 1\n", "tick 2\n", "to stderr")]
    assert positions == sorted(positions)
    assert "[corral: exit code 3;" in text
    assert "\x1b[" in drawn  # it did draw (a spinner, colours)


def test_in_a_pipe_corral_run_writes_only_the_scripts_bytes_and_one_summary(
    corral_home: CorralHome, tmp_path: Path
) -> None:
    script = tmp_path / "ticks.py"
    script.write_text(TICKS)

    done = subprocess.run(
        [corral_bin(), "run", str(script)],
        env=env_with_home(corral_home),
        capture_output=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 3
    assert done.stdout == b"tick 0\ntick 1\ntick 2\nto stderr\n"
    assert b"\x1b" not in done.stdout + done.stderr
    assert done.stderr.decode().splitlines()[-1].startswith("[corral: exit code 3;")
    assert "running" not in done.stderr.decode()
