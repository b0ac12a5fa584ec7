"""Wiring for one corral process: home, config, owner identity, backend, audit.

Read from the environment only by the CLI entry point, then passed down.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from orchestrator.audit import AuditLog
from orchestrator.config import CorralConfig, SandboxConfig, load_config
from orchestrator.docker_backend import DockerBackend
from orchestrator.errors import ConfigError
from orchestrator.home import CorralHome
from orchestrator.owner import Owner
from orchestrator.script_slots import ScriptSlots, host_default_max_concurrent
from sandboxes.script import InvalidSettings, ScriptContext, ScriptSettings


@dataclass(frozen=True, slots=True)
class Runtime:
    home: CorralHome
    config: CorralConfig | ConfigError
    owner: Owner
    backend: DockerBackend
    audit: AuditLog
    slots: ScriptSlots | None = None

    def sandbox_config(self) -> SandboxConfig | ConfigError:
        if isinstance(self.config, ConfigError):
            return self.config
        return self.config.container.sandbox

    def script_context(self, agent: str) -> ScriptContext:
        sandbox = self.sandbox_config()
        settings: ScriptSettings | InvalidSettings
        if isinstance(sandbox, ConfigError):
            settings = InvalidSettings(tuple(sandbox.problems), sandbox.file)
        else:
            settings = ScriptSettings(
                image=sandbox.image,
                tmp_size_mb=sandbox.tmp_size_mb,
                when_unavailable=sandbox.script_when_unavailable,
            )
        return ScriptContext(
            backend=self.backend,
            audit=self.audit,
            work_dir=self.home.work_dir,
            sandbox=settings,
            agent=agent,
            slots=self.slots,
        )


def slots_for(home: CorralHome, config: CorralConfig) -> ScriptSlots:
    """One limiter per process, shared by every call it makes (SPEC S1, issue: busy)."""
    sandbox = config.container.sandbox
    return ScriptSlots(
        home.slots_dir,
        sandbox.max_concurrent or host_default_max_concurrent(),
        max_queued=sandbox.max_queued,
        queue_timeout_seconds=sandbox.queue_timeout_seconds,
    )


@asynccontextmanager
async def open_runtime(home: CorralHome) -> AsyncIterator[Runtime]:
    home.ensure()
    try:
        config: CorralConfig | ConfigError = load_config(home.config_file)
    except ConfigError as exc:
        config = exc
    docker_host = None if isinstance(config, ConfigError) else config.container.docker_host
    backend = DockerBackend(Owner.current(), docker_host)
    try:
        yield Runtime(
            home=home,
            config=config,
            owner=backend.owner,
            backend=backend,
            audit=AuditLog(home.audit_file),
            slots=None if isinstance(config, ConfigError) else slots_for(home, config),
        )
    finally:
        await backend.close()
