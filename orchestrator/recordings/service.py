"""The gateway's recordings (issue 24): a recorder for each kiosk session and rig while it
runs, retention, and what a killed gateway left finished.

`begin` is called by a surface manager once a surface has started, `end` once it ended;
the recorders' tasks run in `running`'s task group (the gateway's lifetime). Without it
(a manager run on its own, `[recording] enabled = false`) nothing is recorded.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from orchestrator.audit import AuditLog
from orchestrator.config import RecordingConfig
from orchestrator.errors import CorralError
from orchestrator.recordings.recorder import Frame, Recorder
from orchestrator.recordings.store import RecordingMeta, RecordingStore
from orchestrator.recordings.use import AiUse
from orchestrator.recordings.video import load_remuxer
from sandboxes.recording import Kept, over_bound

logger = logging.getLogger("corral.recording")
ENCODER_THREADS = 2


class Recorded(Protocol):
    """What a recording is begun from: a surface that has started
    (`orchestrator.surfaces.base.Surface`)."""

    @property
    def id(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def seat(self) -> str: ...
    @property
    def conversation(self) -> str: ...
    @property
    def use(self) -> AiUse: ...
    async def frame(self) -> Frame: ...


@dataclass
class _Live:
    recorder: Recorder
    scope: anyio.CancelScope
    done: anyio.Event


class Recordings:
    def __init__(self, root: Path, config: RecordingConfig, audit: AuditLog) -> None:
        self.store = RecordingStore(root)
        self.config = config
        self.audit = audit
        self.live: dict[str, _Live] = {}
        self._tg: TaskGroup | None = None
        # Encoding is CPU work, in each recording's encoder process: every recorder of the
        # gateway waits on its process from these threads, so no more encoders work at
        # once than there are of them, and recordings never take the threads the rest of
        # the gateway runs its work in.
        self._encoders = anyio.CapacityLimiter(ENCODER_THREADS)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Recordings]:
        """Record while this is entered: first what a killed gateway left is finished
        and retention runs; on exit every recorder still running is ended."""
        if self.config.enabled:
            await anyio.to_thread.run_sync(self._at_start)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                self._tg = None
                with anyio.CancelScope(shield=True):
                    for live in list(self.live.values()):
                        await self.end(live.recorder, "the gateway stopped")
                tg.cancel_scope.cancel()

    def _at_start(self) -> None:
        load_remuxer()
        try:
            self.store.ensure()
            for recording_id in self.store.finish_orphans(()):
                logger.info("recording %s: finished after its gateway was killed", recording_id)
            self._prune()
        except OSError as exc:
            logger.warning("recordings: %s could not be tidied (%s)", self.store.root, exc)

    def begin(self, surface: Recorded) -> Recorder | None:
        """Start recording a surface that has just started, its screen taken by its
        `frame` (None: not recorded)."""
        if not self.config.enabled or self._tg is None:
            return None
        surface_id, agent = surface.id, surface.agent
        meta = RecordingMeta(
            id=surface_id,
            agent=agent,
            surface=surface.kind,
            seat=surface.seat,
            conversation=surface.conversation,
            started_at=time.time(),
        )
        try:
            self.store.create(meta)
        except (OSError, CorralError) as exc:
            self._audit("recording_stopped", agent, {"session": surface_id, "why": str(exc)})
            return None
        recorder = Recorder(
            self.store,
            meta,
            surface.frame,
            self.config.fps,
            on_stopped=lambda why: self._stopped(agent, surface_id, why),
            on_grown=self._over,
            encoders=self._encoders,
            use=surface.use,
        )
        live = _Live(recorder, anyio.CancelScope(), anyio.Event())
        self.live[surface_id] = live
        self._tg.start_soon(self._run, live)
        self._audit("recording_started", agent, {"session": surface_id, "surface": surface.kind})
        return recorder

    async def _run(self, live: _Live) -> None:
        try:
            with live.scope:
                await live.recorder.run()
        except Exception:  # a recorder's bug is never the gateway's end
            logger.exception("recording %s failed", live.recorder.meta.id)
        finally:
            live.done.set()

    async def end(self, recorder: Recorder | None, ended_by: str, *, last: bool = False) -> None:
        """The surface ends: stop its recorder, take its last frame (`last`: the surface
        still answers; `Recorder.last_frame`), close its files, run retention."""
        if recorder is None:
            return
        live = self.live.pop(recorder.meta.id, None)
        with anyio.CancelScope(shield=True):
            if live is not None:
                live.scope.cancel()
                await live.done.wait()  # no frame is being encoded once this returns
            if last:
                await recorder.last_frame()
            meta = await anyio.to_thread.run_sync(recorder.close_sync, ended_by)
            try:
                size = self.store.size_of(meta.id)
                self.store.write_meta(meta.model_copy(update={"bytes": size}))
                await anyio.to_thread.run_sync(self._prune)
            except (OSError, CorralError) as exc:
                logger.warning("recording %s: its end was not written (%s)", meta.id, exc)
                return
        details = {"session": meta.id, "frames": meta.frames, "bytes": size}
        self._audit("recording_ended", meta.agent, details)

    def _prune(self) -> list[str]:
        cfg = self.config
        return self.store.prune(self.live, cfg.keep_days, cfg.max_total_mb)

    def _over(self) -> str | None:
        """After a recorder wrote another MiB: retention now; why it stops, if the live
        recordings alone are over `max_total_mb`."""
        self._prune()
        kept = [Kept(i, 0.0, self.store.size_of(i), True) for i in self.live]
        if over_bound(kept, self.config.max_total_mb << 20):
            return f"the recordings reached [recording] max_total_mb ({self.config.max_total_mb})"
        return None

    def _stopped(self, agent: str, surface_id: str, why: str) -> None:
        self._audit("recording_stopped", agent, {"session": surface_id, "why": why})

    def _audit(self, event: str, agent: str, details: dict[str, object]) -> None:
        """Recording events are audited when the log can be written; a recording is
        never worth a session (the disk that stopped it may be the audit's)."""
        try:
            self.audit.record(event, agent, details)
        except CorralError as exc:
            logger.warning("recording event %s not audited: %s", event, exc)
