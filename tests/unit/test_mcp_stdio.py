"""corral mcp's own stdio streams (mcp_front.stdio): lines read on the loop however the
bytes come, writes larger than a pipe holds, and the claim of fd 0 and fd 1 in a real
child process (what a child or a stray print writes never reaches the wire)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from mcp_front.stdio import LineReader, Writer

pytestmark = pytest.mark.anyio


def pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    return read_end, write_end


async def test_lines_come_whole_however_the_bytes_are_cut() -> None:
    read_end, write_end = pipe()
    reader = LineReader(read_end)
    got: list[str] = []

    async def read_all() -> None:
        async for line in reader:
            got.append(line)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_all)
        for piece in [b'{"a":', b"1}\n", b'{"b":2}\n{"c"', b":3}\n", "é\n".encode(), b"tail"]:
            await anyio.wait_all_tasks_blocked()  # the reader waits for more
            os.write(write_end, piece)
        os.close(write_end)

    assert got == ['{"a":1}\n', '{"b":2}\n', '{"c":3}\n', "é\n", "tail"]
    os.close(read_end)


async def test_a_line_larger_than_a_read_and_a_pipe_comes_whole() -> None:
    read_end, write_end = pipe()
    line = ("x" * 3_000_000 + "\n").encode()
    got: list[str] = []

    async def read_one() -> None:
        got.append(await LineReader(read_end).__anext__())

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_one)
        await Writer(write_end).write(line.decode())  # waits while the pipe is full

    assert got == [line.decode()]
    os.close(read_end)
    os.close(write_end)


async def test_the_end_of_the_input_ends_the_lines() -> None:
    read_end, write_end = pipe()
    os.close(write_end)
    assert [line async for line in LineReader(read_end)] == []
    os.close(read_end)


CHILD = textwrap.dedent(
    """
    import os, subprocess, sys
    import anyio
    from mcp_front.stdio import claimed_stdio

    async def main():
        with claimed_stdio() as wire:
            if wire is None:
                print("not claimed", file=sys.stderr)
                return
            reader, writer = wire
            print("a stray print")                       # Python's stdout
            subprocess.run(["sh", "-c", "echo a child line; cat"], check=True)  # fd 0, 1
            line = await reader.__anext__()
            await writer.write("answer to " + line)
        print("after the block", flush=True)             # fd 1 is the wire's again

    anyio.run(main)
    """
)


def run_child(stdin: int | None, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        stdin=stdin,
        input=None if stdin is not None else b"request\n",
        capture_output=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_the_claim_keeps_children_and_prints_off_the_wire(tmp_path: Path) -> None:
    done = run_child(None, tmp_path)

    assert done.stdout == b"answer to request\nafter the block\n"
    assert b"a stray print" in done.stderr
    assert b"a child line" in done.stderr  # the child's fd 1 was stderr; its fd 0, empty


def test_a_file_as_stdin_is_left_to_the_sdk(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(b"request\n")
    with requests.open("rb") as stdin:
        done = run_child(stdin.fileno(), tmp_path)

    assert b"not claimed" in done.stderr
