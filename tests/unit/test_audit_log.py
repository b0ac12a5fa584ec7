"""The append-only audit log (SPEC S6.3): one JSON line per event, never output or secrets."""

from __future__ import annotations

import json
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.audit import AuditLog
from orchestrator.errors import AuditUnavailable

pytestmark = pytest.mark.unit


def test_each_event_is_appended_as_one_json_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)

    log.record("script_executed", "alice", {"exit_code": 0, "duration_ms": 12})
    log.record("script_sandbox_unavailable", None, {"code_name": "daemon_unreachable"})

    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert set(first) == {"time", "agent", "event", "details"}
    assert first["agent"] == "alice"
    assert first["event"] == "script_executed"
    assert first["details"] == {"exit_code": 0, "duration_ms": 12}
    assert second["agent"] is None
    assert second["event"] == "script_sandbox_unavailable"


def test_the_event_time_is_an_aware_utc_timestamp_of_now(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    before = datetime.now(UTC)

    log.record("e", "a", {})

    when = datetime.fromisoformat(log.read()[0]["time"])
    assert when.utcoffset() == timedelta(0)
    assert before - timedelta(seconds=1) <= when <= datetime.now(UTC)


def test_recording_appends_and_never_rewrites_earlier_events(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text('{"event":"older"}\n')
    log = AuditLog(path)

    log.record("newer", "a", {"n": 1})

    assert [event["event"] for event in log.read()] == ["older", "newer"]


@pytest.mark.parametrize("key", ["output", "text", "password", "code", "secret", "token"])
def test_details_that_would_carry_output_text_or_secrets_are_refused(
    tmp_path: Path, key: str
) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)

    with pytest.raises(ValueError, match=key):
        log.record("script_executed", "alice", {"exit_code": 0, key: "s3cr3t"})

    assert not path.exists()


def test_metadata_keys_that_merely_resemble_forbidden_ones_are_allowed(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")

    log.record("script_executed", "a", {"code_bytes": 10, "output_bytes": 3, "code_name": "x"})

    assert log.read()[0]["details"] == {"code_bytes": 10, "output_bytes": 3, "code_name": "x"}


def test_the_audit_file_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "home" / "audit.jsonl"

    AuditLog(path).record("e", "a", {})

    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_reading_a_log_that_does_not_exist_yet_gives_no_events(tmp_path: Path) -> None:
    assert AuditLog(tmp_path / "audit.jsonl").read() == []


def test_concurrent_writers_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    padding = "x" * 2000  # long lines make a torn write visible

    def writer(n: int) -> None:
        log = AuditLog(path)
        for i in range(50):
            log.record("e", f"agent-{n}", {"i": i, "pad": padding})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(events) == 200
    for n in range(4):
        assert [e["details"]["i"] for e in events if e["agent"] == f"agent-{n}"] == list(range(50))


def test_a_line_torn_by_a_killed_writer_is_closed_and_skipped(tmp_path: Path) -> None:
    """What a writer killed mid-write (or stopped by a full disk) leaves: half a line and
    no line end. The next event starts on a line of its own, and a reader gets every
    whole event and nothing of the torn one."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.record("before", "alice", {})
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"agent":"alice","details":{},"ev')  # the torn tail
    log.record("after", "alice", {})
    log.record("later", "bob", {})

    assert [e["event"] for e in log.read()] == ["before", "after", "later"]
    lines = path.read_bytes().split(b"\n")
    assert lines[1] == b'{"agent":"alice","details":{},"ev'  # kept, on a line of its own
    assert [json.loads(line)["event"] for line in lines[2:4]] == ["after", "later"]


def test_a_log_that_cannot_be_written_names_the_file_and_the_fix(tmp_path: Path) -> None:
    """The full disk itself is in tests/faults/test_full_disk.py; here the home is a file."""
    (tmp_path / "home").write_text("not a directory")
    log = AuditLog(tmp_path / "home" / "audit.jsonl")
    with pytest.raises(AuditUnavailable) as refused:
        log.record("script_started", "alice", {})
    message = str(refused.value)
    assert message.startswith("Nothing was done: corral cannot write its audit log")
    assert str(tmp_path / "home" / "audit.jsonl") in message
    assert "Fix: free space on (or make writable)" in message
