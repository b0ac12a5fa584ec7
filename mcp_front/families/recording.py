"""recording_list and recording_get (issue 24 item 5): an agent's own recordings, behind
`[capabilities] recording` (hidden by default, gated as every family).

Run by the front itself from CORRAL_HOME's recordings (orchestrator.recordings.store): a
recording outlives its session and its gateway, so no gateway is needed. An agent sees
its own recordings only: another agent's id answers as an unknown one does ("not
found"). recording_get never puts the video inline: it returns resource links
(`corral://recording/ID/video.webm`, `.../timeline.jsonl`) that `resources/read` serves to
this agent, while the capability still shows the tools, up to `READ_MAX_BYTES` (larger
ones: an operator's `corral recordings export`).
"""

from __future__ import annotations

import base64
from typing import Any

import mcp_types as types

from orchestrator.audit import AuditLog
from orchestrator.errors import RecordingError
from orchestrator.home import CorralHome
from orchestrator.recordings.store import TIMELINE, RecordingMeta, RecordingStore
from sandboxes.params import RecordingGetParams

SCHEME = "corral://recording/"
READ_MAX_BYTES = 64 * 1024 * 1024
KINDS = {"video.webm": "video/webm", "timeline.jsonl": "application/x-ndjson"}


def _listed(meta: RecordingMeta) -> dict[str, Any]:
    return {
        "recording_id": meta.id,
        "surface": meta.surface,
        "started_at": meta.started_at,
        "ended_at": meta.ended_at,
        "length_seconds": meta.length_seconds,
        "frames": meta.frames,
        "actions": meta.actions,
        "approvals": meta.approvals,
        "takeovers": meta.takeovers,
        "stopped": meta.stopped,
    }


def _own(home: CorralHome, agent: str, recording_id: str) -> RecordingMeta:
    """The agent's own recording, or RecordingError (another's reads as unknown)."""
    try:
        meta = RecordingStore(home.recordings_dir).meta(recording_id)
    except RecordingError:
        meta = None
    if meta is None or meta.agent != agent:
        raise RecordingError(f"recording_id: no recording {recording_id} of yours (recording_list)")
    return meta


def recording_list(home: CorralHome, agent: str) -> types.CallToolResult:
    mine = [m for m in RecordingStore(home.recordings_dir).all() if m.agent == agent]
    lines = [
        f"{m.id}: {m.surface}, {m.length_seconds:.0f} s, {m.actions} actions, "
        f"{m.approvals} approvals, {m.takeovers} take overs"
        + ("" if m.ended_at is not None else " (still recording)")
        for m in mine
    ]
    text = f"{len(mine)} recording(s) of yours." + ("\n" + "\n".join(lines) if lines else "")
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content={"recordings": [_listed(m) for m in mine]},
    )


def recording_get(
    home: CorralHome, agent: str, params: RecordingGetParams, audit: AuditLog
) -> types.CallToolResult:
    meta = _own(home, agent, params.recording_id)
    has_video = RecordingStore(home.recordings_dir).has_video(meta.id)
    base = f"{SCHEME}{meta.id}/"
    links: list[types.ContentBlock] = [
        types.ResourceLink(
            uri=base + "timeline.jsonl",
            name=f"{meta.id}-timeline.jsonl",
            mime_type=KINDS["timeline.jsonl"],
            description="The recording's timeline, one JSON object a line (t: its time).",
        )
    ]
    if has_video:
        links.insert(
            0,
            types.ResourceLink(
                uri=base + "video.webm",
                name=f"{meta.id}.webm",
                mime_type=KINDS["video.webm"],
                description="The masked video (WebM, VP9): read it with resources/read.",
            ),
        )
    audit.record("recording_viewed", agent, {"session": meta.id})
    text = (
        f"Recording {meta.id} ({meta.surface}, {meta.length_seconds:.0f} s, {meta.frames} "
        f"frames, {meta.actions} actions). Read its "
        + ("video and timeline" if has_video else "timeline (no frame was taken)")
        + " with resources/read."
    )
    structured = _listed(meta) | {
        "video_uri": base + "video.webm" if has_video else None,
        "timeline_uri": base + "timeline.jsonl",
    }
    return types.CallToolResult(
        content=[types.TextContent(text=text), *links], structured_content=structured
    )


def read_recording(
    home: CorralHome, agent: str, uri: str, audit: AuditLog
) -> types.ReadResourceResult:
    """A recording's video or timeline for resources/read; RecordingError when the URI
    names nothing of this agent's, or the file is over READ_MAX_BYTES."""
    rest = uri.removeprefix(SCHEME)
    recording_id, _, name = rest.partition("/")
    if name not in KINDS:
        raise RecordingError(f"Resource not found: {uri}")
    meta = _own(home, agent, recording_id)
    store = RecordingStore(home.recordings_dir)
    path = store.video(meta.id) if name == "video.webm" else store.dir_of(meta.id) / TIMELINE
    size = path.stat().st_size if path.is_file() else 0
    if size > READ_MAX_BYTES:
        raise RecordingError(
            f"{uri} is {size >> 20} MiB, over the {READ_MAX_BYTES >> 20} MiB a read returns; "
            "an operator can export it (corral recordings export)"
        )
    data = path.read_bytes() if size else b""
    audit.record("recording_read", agent, {"session": meta.id, "file": name, "bytes": size})
    return types.ReadResourceResult(
        contents=[
            types.BlobResourceContents(
                uri=uri, mime_type=KINDS[name], blob=base64.b64encode(data).decode()
            )
        ]
    )
