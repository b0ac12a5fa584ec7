"""Output caps (SPEC S1.4: read at most 2 MiB, return at most 1 MiB, say what was cut)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandboxes.script import ScriptResult
from sandboxes.script_policy import (
    READ_CAP_BYTES,
    REPLY_CAP_BYTES,
    OutputCollector,
    cut_utf8,
)

pytestmark = pytest.mark.unit

MIB = 1024 * 1024
PROPERTY = settings(database=None, deadline=None, max_examples=300)
UTF8_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=80)


@st.composite
def chunked_utf8(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """Valid UTF-8 output, split into chunks at arbitrary byte offsets (even mid-character)."""
    data = draw(UTF8_TEXT).encode()
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return data, [data[a:b] for a, b in pairwise(bounds)]


@st.composite
def caps_with_reply_below_read(draw: st.DrawFn) -> tuple[int, int]:
    read_cap = draw(st.integers(2, 120))
    return read_cap, draw(st.integers(1, read_cap - 1))


def collect(chunks: list[bytes], read_cap: int, reply_cap: int) -> tuple[bytes, OutputCollector]:
    collector = OutputCollector(read_cap=read_cap, reply_cap=reply_cap)
    shown = b"".join(collector.feed(chunk) for chunk in chunks)
    return shown, collector


def check_collector_properties(
    data: bytes, chunks: list[bytes], read_cap: int, reply_cap: int
) -> None:
    shown, collector = collect(chunks, read_cap, reply_cap)
    out = collector.result()

    assert out.total_bytes == sum(len(chunk) for chunk in chunks) == len(data)
    assert out.kept_bytes <= read_cap
    assert out.kept_bytes == min(len(data), read_cap)
    assert shown == data[: out.kept_bytes]  # what a live stream saw is exactly what was kept
    assert out.returned_bytes <= reply_cap
    # The returned text is a valid UTF-8 prefix of the output: no character split or replaced.
    assert out.text.encode("utf-8") == data[: out.returned_bytes]
    # ...and as long as it can be: at most one partial character (3 bytes) is dropped.
    assert out.returned_bytes >= min(len(data), reply_cap) - 3
    assert out.truncated == (out.total_bytes > out.returned_bytes)


@PROPERTY
@given(chunked_utf8(), caps_with_reply_below_read())
def test_collected_output_is_a_capped_valid_utf8_prefix_of_any_chunked_output(
    output: tuple[bytes, list[bytes]], caps: tuple[int, int]
) -> None:
    data, chunks = output
    read_cap, reply_cap = caps

    check_collector_properties(data, chunks, read_cap, reply_cap)


@pytest.mark.parametrize("reply_cap", [10, 11])
def test_a_reply_cap_not_below_the_read_cap_is_refused(reply_cap: int) -> None:
    """Equal caps would let the read cap split a character that the reply then shows as U+FFFD."""
    with pytest.raises(ValueError, match="reply_cap"):
        OutputCollector(read_cap=10, reply_cap=reply_cap)


def test_a_reply_cap_above_the_read_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="reply_cap"):
        OutputCollector(read_cap=10, reply_cap=11)


def test_default_caps_read_2_mib_and_return_1_mib_of_a_3_mib_output() -> None:
    assert (READ_CAP_BYTES, REPLY_CAP_BYTES) == (2 * MIB, MIB)
    collector = OutputCollector()
    chunk = b"x" * (64 * 1024)

    shown = sum(len(collector.feed(chunk)) for _ in range(48))  # 3 MiB
    out = collector.result()

    assert shown == 2 * MIB
    assert out.total_bytes == 3 * MIB
    assert out.kept_bytes == 2 * MIB
    assert out.returned_bytes == MIB
    assert len(out.text) == MIB
    assert out.truncated is True


def test_the_truncation_note_says_how_much_was_returned_and_cut() -> None:
    collector = OutputCollector(read_cap=8, reply_cap=4)
    collector.feed(b"0123456789")

    note = collector.result().truncation_note()

    assert "4 of 10 bytes returned" in note
    assert "6 bytes cut" in note
    assert str(READ_CAP_BYTES) in note
    assert str(REPLY_CAP_BYTES) in note


def test_a_character_straddling_the_reply_cap_is_left_out_whole() -> None:
    collector = OutputCollector()
    collector.feed(b"a" + "\u00e9".encode() * MIB)  # the 1 MiB boundary falls inside an e-acute

    out = collector.result()

    assert out.returned_bytes == MIB - 1
    assert out.text == "a" + "\u00e9" * ((MIB - 2) // 2)
    assert "\ufffd" not in out.text


def test_output_under_the_caps_is_returned_whole_and_not_truncated() -> None:
    collector = OutputCollector()
    for chunk in (b"hello ", "w\u00f6rld".encode(), b"\n"):
        collector.feed(chunk)

    out = collector.result()

    assert out.text == "hello w\u00f6rld\n"
    assert out.truncated is False
    assert out.truncation_note() == ""


def test_output_that_is_not_utf8_is_returned_with_replacement_characters() -> None:
    collector = OutputCollector()
    collector.feed(b"ok \xff\xfe done")

    out = collector.result()

    assert out.text.startswith("ok ")
    assert out.text.endswith(" done")
    assert "\ufffd" in out.text
    assert out.truncated is False


# ------------------------------------------------------------------ cut_utf8


@PROPERTY
@given(UTF8_TEXT, st.integers(0, 400))
def test_cut_utf8_keeps_the_longest_whole_character_prefix_within_the_limit(
    text: str, limit: int
) -> None:
    data = text.encode()

    cut = cut_utf8(data, limit)

    assert len(cut) <= limit
    assert data.startswith(cut)
    cut.decode("utf-8")  # strict: raises if a character was split
    if len(data) <= limit:
        assert cut == data
    else:
        next_char = data[len(cut) :].decode("utf-8")[0].encode()
        assert len(cut) + len(next_char) > limit


@PROPERTY
@given(st.binary(max_size=200), st.integers(0, 250))
def test_cut_utf8_of_arbitrary_bytes_is_a_prefix_within_the_limit(data: bytes, limit: int) -> None:
    cut = cut_utf8(data, limit)

    assert len(cut) <= limit
    assert data.startswith(cut)


def test_cut_utf8_steps_back_over_a_split_four_byte_character() -> None:
    data = "ab\U0001f600".encode()  # 2 + 4 bytes

    assert [cut_utf8(data, n) for n in range(7)] == [
        b"",
        b"a",
        b"ab",
        b"ab",
        b"ab",
        b"ab",
        data,
    ]


# ------------------------------------------------------------------ ScriptResult


BASE = ScriptResult(
    exit_code=0,
    timed_out=False,
    hard_cap_hit=False,
    oom_killed=False,
    truncated=False,
    output="hello\n",
    output_bytes=6,
    returned_bytes=6,
    duration_ms=42,
    timeout_seconds=30,
    sandboxed=True,
)


def test_the_text_result_is_the_output_then_the_exit_code() -> None:
    text = BASE.to_text()

    assert text.startswith("hello\n")
    assert "exit code 0" in text
    assert "42 ms" in text
    assert "truncated" not in text
    assert "UNSANDBOXED" not in text


def test_the_text_result_says_how_many_bytes_were_returned_and_cut() -> None:
    result = replace(BASE, truncated=True, output_bytes=3 * MIB, returned_bytes=MIB)

    text = result.to_text()

    assert f"{MIB} of {3 * MIB} bytes returned" in text
    assert f"{2 * MIB} bytes cut" in text


def test_the_text_result_says_the_script_timed_out_and_after_how_long() -> None:
    result = replace(BASE, exit_code=None, timed_out=True, timeout_seconds=5)

    text = result.to_text()

    assert "timed out after 5 s" in text
    assert "exit code" not in text


def test_the_summary_names_the_hard_cap_when_it_fired() -> None:
    result = replace(BASE, exit_code=None, timed_out=True, hard_cap_hit=True)

    assert "600 s hard cap" in result.summary()


def test_the_summary_says_out_of_memory_when_the_script_was_oom_killed() -> None:
    result = replace(BASE, exit_code=137, oom_killed=True)

    assert "out of memory" in result.summary()


def test_the_summary_flags_a_run_outside_the_sandbox() -> None:
    assert "UNSANDBOXED" in replace(BASE, sandboxed=False).summary()


def test_the_structured_result_carries_the_fields_spec_s1_8_requires() -> None:
    structured = BASE.structured()

    assert {"exit_code", "timed_out", "truncated", "output", "duration_ms"} <= set(structured)
    assert structured["output"] == "hello\n"
