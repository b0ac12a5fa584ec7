"""Recordings on disk (issue 24): `CORRAL_HOME/recordings/ID/` per session or rig, owner
only (directories 0700, files 0600):

- `video.ivf` while it is recorded, `video.webm` once it ended: the masked frames
  (`orchestrator.recordings.video`; `video.live.webm`, a live one's frames so far, made
  for its player or an export);
- `timeline.jsonl`: the session's timeline, one JSON object a line (its actions, approvals,
  take overs and the recording's own events: a frame blacked, the recording stopped);
- `meta.json`: who and what (agent, surface, seat, start, end, counts), rewritten whole
  (a temporary file renamed over it) at the start and the end.

Retention (`sandboxes.recording.to_prune`) runs when a recording ends and when a gateway
starts; the gateway also finishes what a killed one left (`finish_orphans`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from orchestrator.errors import RecordingError
from orchestrator.recordings.video import VideoError, finish
from sandboxes.recording import Kept, check_recording_id, to_prune

VIDEO = "video.webm"
LIVE_VIDEO = "video.ivf"
SO_FAR = "video.live.webm"
IVF_HEADER_BYTES = 32  # an IVF file with no frame is its header alone
TIMELINE = "timeline.jsonl"
META = "meta.json"


class RecordingMeta(BaseModel):
    """What `corral recordings list`, the console's past sessions and `recording_list`
    show of a recording."""

    id: str
    agent: str
    surface: str  # kiosk, desktop, browser, android, ios
    seat: str
    conversation: str = ""
    started_at: float
    ended_at: float | None = None  # None: live, or its gateway was killed (see `ended_by`)
    ended_by: str | None = None  # why the session ended, or "the gateway was killed"
    width: int = 0
    height: int = 0
    frames: int = 0
    length_seconds: float = 0.0
    actions: int = 0
    approvals: int = 0
    takeovers: int = 0
    bytes: int = 0
    stopped: str | None = None  # why the recording stopped before its session ended


class RecordingStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)

    def dir_of(self, recording_id: str) -> Path:
        try:
            return self.root / check_recording_id(recording_id)
        except ValueError as exc:
            raise RecordingError(str(exc)) from exc

    def create(self, meta: RecordingMeta) -> Path:
        """A new recording's directory, with its meta written."""
        self.ensure()
        where = self.dir_of(meta.id)
        where.mkdir(mode=0o700)
        self.write_meta(meta)
        return where

    def write_meta(self, meta: RecordingMeta) -> None:
        where = self.dir_of(meta.id)
        tmp = where / (META + ".tmp")
        data = meta.model_dump_json(indent=1).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, where / META)

    def meta(self, recording_id: str) -> RecordingMeta:
        where = self.dir_of(recording_id)
        try:
            return RecordingMeta.model_validate_json((where / META).read_bytes())
        except FileNotFoundError:
            raise RecordingError(
                f"no recording {recording_id!r} (`corral recordings list` lists them)"
            ) from None
        except ValueError as exc:
            raise RecordingError(f"recording {recording_id!r} has a damaged meta.json") from exc

    def all(self) -> list[RecordingMeta]:
        """Every recording, newest first (a damaged one is left out)."""
        out = []
        for where in self._dirs():
            with contextlib.suppress(RecordingError):
                out.append(self.meta(where.name))
        return sorted(out, key=lambda m: (m.started_at, m.id), reverse=True)

    def _dirs(self) -> Iterator[Path]:
        if not self.root.is_dir():
            return
        for where in self.root.iterdir():
            if where.is_dir() and not where.name.startswith("."):
                yield where

    def size_of(self, recording_id: str) -> int:
        where = self.dir_of(recording_id)
        return sum(f.stat().st_size for f in where.iterdir() if f.is_file())

    def timeline(self, recording_id: str) -> list[dict[str, Any]]:
        """The recording's timeline lines (a torn last line is left out)."""
        path = self.dir_of(recording_id) / TIMELINE
        out = []
        with contextlib.suppress(FileNotFoundError), path.open(encoding="utf-8") as fh:
            for line in fh:
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict):
                        out.append(entry)
        return out

    def has_video(self, recording_id: str) -> bool:
        """Whether the recording has a frame to show: its WebM, or live frames past the
        IVF file's header."""
        where = self.dir_of(recording_id)
        if (where / VIDEO).is_file():
            return True
        try:
            return (where / LIVE_VIDEO).stat().st_size > IVF_HEADER_BYTES
        except FileNotFoundError:
            return False

    def video(self, recording_id: str) -> Path:
        """The recording's WebM video; for one still recorded, its frames so far."""
        where = self.dir_of(recording_id)
        if (where / VIDEO).is_file():
            return where / VIDEO
        if (where / LIVE_VIDEO).is_file():
            with contextlib.suppress(OSError, VideoError):
                if _newer(where / SO_FAR, where / LIVE_VIDEO):  # no frame since the last copy
                    return where / SO_FAR
                if finish(where / LIVE_VIDEO, where / SO_FAR):
                    return where / SO_FAR
        raise RecordingError(f"recording {recording_id!r} has no video (no frame was taken)")

    def finish_video(self, recording_id: str) -> None:
        """The recorded frames (IVF) written as the recording's WebM video; the IVF and a
        live copy removed once it is."""
        where = self.dir_of(recording_id)
        if not (where / LIVE_VIDEO).is_file():
            return
        if finish(where / LIVE_VIDEO, where / VIDEO):
            (where / LIVE_VIDEO).unlink()
        (where / SO_FAR).unlink(missing_ok=True)

    def remove(self, recording_id: str) -> None:
        where = self.dir_of(recording_id)
        if not where.is_dir():
            raise RecordingError(f"no recording {recording_id!r} (`corral recordings list`)")
        shutil.rmtree(where)

    def prune(
        self, live: Iterable[str], keep_days: int, max_total_mb: int, now: float | None = None
    ) -> list[str]:
        """Remove what retention says to (`sandboxes.recording.to_prune`); their ids."""
        live_ids = set(live)
        kept = [Kept(m.id, m.started_at, self.size_of(m.id), m.id in live_ids) for m in self.all()]
        gone = to_prune(kept, time.time() if now is None else now, keep_days, max_total_mb << 20)
        for recording_id in gone:
            with contextlib.suppress(RecordingError, OSError):
                self.remove(recording_id)
        return gone

    def finish_orphans(self, live: Iterable[str]) -> list[str]:
        """Recordings a killed gateway left unended: their video finished (seekable, up to
        its last whole second), their meta ended "the gateway was killed". Their ids."""
        live_ids = set(live)
        done = []
        for meta in self.all():
            if meta.ended_at is not None or meta.id in live_ids:
                continue
            with contextlib.suppress(OSError, VideoError):  # unreadable: kept as is
                self.finish_video(meta.id)
            timeline = self.timeline(meta.id)
            last = max([meta.started_at, *(float(e.get("at", 0)) for e in timeline)])
            ended = meta.model_copy(update={"ended_at": last, "ended_by": "the gateway was killed"})
            self.write_meta(ended.model_copy(update={"bytes": self.size_of(meta.id)}))
            done.append(meta.id)
        return done

    def export(self, recording_id: str, out: Path, audit_lines: list[str]) -> dict[str, str]:
        """Copy the recording and `audit_lines` (its session's audit, JSON lines) into the
        new directory `out`, with `MANIFEST.sha256` (sha256sum's format); the manifest."""
        where = self.dir_of(recording_id)
        self.meta(recording_id)  # it exists
        try:
            video: Path | None = self.video(recording_id)
        except RecordingError:
            video = None  # no frame was taken: the timeline and audit are still exported
        out.mkdir(parents=True, exist_ok=False, mode=0o700)
        copies = [(where / n, n) for n in (TIMELINE, META) if (where / n).is_file()]
        copies += [] if video is None else [(video, VIDEO)]
        names = [name for _, name in copies]
        for source, name in copies:
            shutil.copyfile(source, out / name)
            os.chmod(out / name, 0o600)
        (out / "audit.jsonl").write_text("".join(line + "\n" for line in audit_lines))
        os.chmod(out / "audit.jsonl", 0o600)
        sums = {name: _sha256(out / name) for name in [*names, "audit.jsonl"]}
        manifest = "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items()))
        (out / "MANIFEST.sha256").write_text(manifest)
        os.chmod(out / "MANIFEST.sha256", 0o600)
        return sums


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def session_audit(lines: Iterable[dict[str, Any]], recording_id: str) -> list[str]:
    """The audit events about one session or rig (its id in `session`, `rig` or
    `session_id`), as JSON lines."""
    out = []
    for event in lines:
        details = event.get("details") or {}
        if recording_id in (details.get("session"), details.get("rig"), details.get("session_id")):
            out.append(json.dumps(event, separators=(",", ":"), sort_keys=True))
    return out


def _newer(copy: Path, source: Path) -> bool:
    """Whether `copy` exists and was written after `source` last changed."""
    try:
        return copy.stat().st_mtime_ns > source.stat().st_mtime_ns
    except FileNotFoundError:
        return False
