"""The exit line (sandboxes.exit_line): taken out of the output wherever the chunks split
it, trusted only for a plain exit, and never taken from output that merely resembles it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandboxes.exit_line import ExitLine, ExitSaid, is_mark, new_mark

pytestmark = pytest.mark.unit

MARK = "corral-exit-0123456789abcdef"


def _through(line: ExitLine, data: bytes, cuts: list[int]) -> bytes:
    """`data` fed in pieces cut at `cuts`, then the rest: what the output was."""
    out, start = b"", 0
    for cut in sorted(set(c for c in cuts if 0 < c < len(data))):
        out += line.feed(data[start:cut])
        start = cut
    return out + line.feed(data[start:]) + line.rest()


@given(
    output=st.binary(max_size=200),
    code=st.integers(0, 255),
    kills=st.one_of(st.none(), st.integers(0, 10**6)),
    cuts=st.lists(st.integers(0, 260), max_size=12),
)
def test_the_line_is_taken_out_wherever_the_chunks_split_it(
    output: bytes, code: int, kills: int | None, cuts: list[int]
) -> None:
    status = f"{code}:{'' if kills is None else kills}\n".encode()
    line = ExitLine(MARK)
    assert _through(line, output + MARK.encode() + status, cuts) == output
    assert line.said == ExitSaid(code, kills)
    assert line.plain == (code < 128 and kills == 0)


@given(output=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=12))
def test_output_without_the_line_passes_whole(output: bytes, cuts: list[int]) -> None:
    line = ExitLine(MARK)
    assert _through(line, output, cuts) == output
    assert line.said is None and not line.plain


@pytest.mark.parametrize(
    "data",
    [
        b"corral-exit-0123456789abcdeX0:0\n",  # another mark
        b"corral-exit-0123456789abcde",  # the mark cut short: the run ended there
        MARK.encode()[:-1] + b"\n0:0\n",
    ],
)
def test_what_only_resembles_the_line_is_output(data: bytes) -> None:
    line = ExitLine(MARK)
    assert line.feed(data) + line.rest() == data
    assert line.said is None


@pytest.mark.parametrize(
    "status", [b"x:0\n", b"0:0:0\n", b"1234:0\n", b"0:" + b"9" * 30 + b"\n", b"0" * 40]
)
def test_a_malformed_status_is_not_trusted_and_stays_output(status: bytes) -> None:
    line = ExitLine(MARK)
    data = b"out\n" + MARK.encode() + status
    assert line.feed(data) + line.rest() == data
    assert line.said is None and not line.plain
    assert line.malformed or not status.endswith(b"\n")


def test_what_follows_the_line_is_output_again() -> None:
    """The script may have left a process that writes on: not the exit line's business
    (the plain case stops reading there; any other reads to the end)."""
    line = ExitLine(MARK)
    got = line.feed(b"a" + MARK.encode() + b"137:0\nlate " + MARK.encode() + b"0:0\n")
    assert got == b"alate " + MARK.encode() + b"0:0\n"
    assert line.said == ExitSaid(137, 0) and not line.plain


def test_after_a_plain_line_nothing_more_is_output() -> None:
    """The reading stops at a plain line: what came in its chunk is dropped as well, so
    the output does not depend on how the chunks fell."""
    line = ExitLine(MARK)
    assert line.feed(b"a" + MARK.encode() + b"0:0\nlate\n") == b"a"
    assert line.plain


@pytest.mark.parametrize(
    ("code", "kills", "plain"),
    [(0, 0, True), (1, 0, True), (127, 0, True), (128, 0, False), (137, 0, False),
     (0, 1, False), (0, None, False)],
)  # fmt: skip
def test_only_a_plain_exit_ends_the_run_without_the_engine(
    code: int, kills: int | None, plain: bool
) -> None:
    assert ExitSaid(code, kills).plain is plain


def test_new_marks_are_fresh_and_well_formed() -> None:
    marks = {new_mark() for _ in range(100)}
    assert len(marks) == 100 and all(is_mark(m) for m in marks)
    assert not is_mark("corral-exit-0123") and not is_mark(MARK + "0")
