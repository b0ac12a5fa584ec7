"""`corral recordings list|export|rm`: the masked recordings of sessions and rigs
(CORRAL_HOME/recordings; issue 24). Operators only: each command takes the operator token
(`--token-file FILE` or $CORRAL_OPERATOR_TOKEN), checked against CORRAL_HOME's operators,
as approvals are. No gateway is needed: a recording outlives its session and gateway.
Exports and removals are audited with the operator's name."""

from __future__ import annotations

import datetime
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from corral_cli.common import fail, out, read_home
from corral_cli.people import operator_token, token_option
from orchestrator.audit import AuditLog
from orchestrator.errors import CorralError
from orchestrator.home import CorralHome
from orchestrator.recordings.store import RecordingMeta, RecordingStore, session_audit


def _operator(token_file: Path | None) -> tuple[CorralHome, str]:
    """CORRAL_HOME and the operator the token names; exit 2 when it names none."""
    from orchestrator.people.operators import operator_for_token

    home = read_home()
    name = operator_for_token(home, operator_token(token_file))
    if name is None:
        fail("the operator token is not one of this CORRAL_HOME's operators", code=2)
    return home, name


def _store(home: CorralHome) -> RecordingStore:
    return RecordingStore(home.recordings_dir)


@click.group()
def recordings() -> None:
    """Masked recordings of kiosk sessions and rigs (operators only)."""


@recordings.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per recording.")
@token_option
def recordings_list(as_json: bool, token_file: Path | None) -> None:
    """List recordings, newest first: agent, surface, start, length, counts."""
    home, _ = _operator(token_file)
    found = _store(home).all()
    if as_json:
        for meta in found:
            click.echo(meta.model_dump_json())
        return
    table = Table("id", "agent", "surface", "started", "length", "actions", "approvals",
                  "take overs", "MB", "ended")  # fmt: skip
    for meta in found:
        table.add_row(*_row(meta))
    out.print(table if found else "no recordings")


def _row(meta: RecordingMeta) -> list[str]:
    started = datetime.datetime.fromtimestamp(meta.started_at).isoformat(timespec="seconds")
    ended = "recording" if meta.ended_at is None else (meta.ended_by or "ended")
    return [
        meta.id,
        meta.agent,
        meta.surface,
        started,
        f"{meta.length_seconds:.0f} s",
        str(meta.actions),
        str(meta.approvals),
        str(meta.takeovers),
        f"{meta.bytes / (1 << 20):.1f}",
        escape(ended[:60]),
    ]


@recordings.command("export")
@click.argument("recording_id")
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A new directory for the video, timeline, audit lines and SHA-256 manifest.",
)
@token_option
def recordings_export(recording_id: str, out_dir: Path, token_file: Path | None) -> None:
    """Copy RECORDING_ID's video, timeline and its session's audit lines to --out, with a
    SHA-256 manifest (MANIFEST.sha256, as sha256sum -c reads it)."""
    home, operator = _operator(token_file)
    if out_dir.exists():
        fail(f"--out {out_dir}: already exists; name a new directory", code=2)
    audit = AuditLog(home.audit_file)
    try:
        lines = session_audit(audit.read(), recording_id)
        sums = _store(home).export(recording_id, out_dir, lines)
        audit.record("recording_exported", None, {"session": recording_id, "operator": operator})
    except (CorralError, OSError) as exc:
        fail(exc)
    out.print(f"exported {recording_id} to {out_dir}:")
    for name, digest in sorted(sums.items()):
        out.print(f"  {name}  sha256 {digest}")


@recordings.command("rm")
@click.argument("recording_id")
@token_option
def recordings_rm(recording_id: str, token_file: Path | None) -> None:
    """Remove RECORDING_ID (its video, timeline and meta). A recording still being made
    stops being kept: its session goes on, unrecorded from then."""
    home, operator = _operator(token_file)
    store = _store(home)
    try:
        meta = store.meta(recording_id)
        store.remove(recording_id)
        AuditLog(home.audit_file).record(
            "recording_removed", meta.agent, {"session": recording_id, "operator": operator}
        )
    except CorralError as exc:
        fail(exc)
    out.print(f"recording {recording_id} removed")
