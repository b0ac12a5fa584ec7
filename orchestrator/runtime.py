"""Wiring for one corral process: home, config, owner identity, backend, audit.

Read from the environment only by the CLI entry point, then passed down.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass

from orchestrator.audit import AuditLog
from orchestrator.backends.choose import backend_for
from orchestrator.backends.owner import Owner
from orchestrator.config import CorralConfig, SandboxConfig, load_config
from orchestrator.errors import ConfigError
from orchestrator.home import CorralHome
from orchestrator.pools.scripts import PoolSettings, WarmPool, open_pool
from orchestrator.pools.slots import ScriptSlots, host_default_max_concurrent
from sandboxes.ports import ContainerBackend
from sandboxes.script import InvalidSettings, ScriptContext, ScriptSettings, script_user


@dataclass(frozen=True, slots=True)
class Runtime:
    home: CorralHome
    config: CorralConfig | ConfigError
    owner: Owner
    # The one backend `[backend]` chose (`orchestrator.backends.choose`): scripts, kiosk
    # sessions, rigs, pools, egress and reaping all run on it. On Kubernetes, scripts,
    # kiosk sessions and browser and desktop rigs run as pods; warm pools answer
    # NotSupported (docs/kubernetes.md).
    backend: ContainerBackend
    audit: AuditLog
    slots: ScriptSlots | None = None
    pool: WarmPool | None = None  # only where it pays: `open_runtime(..., warm=True)`

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
                runtime=sandbox.runtime,
                when_unavailable=sandbox.script_when_unavailable,
            )
        return ScriptContext(
            backend=self.backend,
            audit=self.audit,
            work_dir=self.home.work_dir,
            sandbox=settings,
            agent=agent,
            slots=self.slots,
            pool=self.pool,
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


def pool_for(
    home: CorralHome, config: CorralConfig | ConfigError, backend: ContainerBackend, *, warm: bool
) -> AbstractAsyncContextManager[WarmPool | None]:
    """The warm pool (`[container.sandbox] warm`), or none: not asked for, `warm = 0`, the
    config is invalid (then every call is refused anyway), or the backend has no pools
    (Kubernetes: every run is cold)."""
    if not warm or isinstance(config, ConfigError) or config.container.sandbox.warm == 0:
        return nullcontext(None)
    if not backend.supports_pools:
        return nullcontext(None)
    sandbox = config.container.sandbox
    settings = PoolSettings(
        image=sandbox.image,
        size=sandbox.warm,
        work_dir=home.work_dir,
        user=script_user(),
        tmp_size_mb=sandbox.tmp_size_mb,
        runtime=sandbox.runtime,
    )
    return open_pool(backend, settings)


@asynccontextmanager
async def open_runtime(
    home: CorralHome, *, warm: bool = False, environ: Mapping[str, str] | None = None
) -> AsyncIterator[Runtime]:
    """`warm=True` (a long-lived server: `corral mcp`) keeps a warm pool of script
    containers while the runtime is open; a one-shot command leaves it off."""
    home.ensure()
    try:
        config: CorralConfig | ConfigError = load_config(home.config_file, home.env.image_tag)
    except ConfigError as exc:
        config = exc
    owner = Owner.current()
    backend = backend_for(
        config,
        owner,
        home.env.engine_environ() if environ is None else environ,
        home.audit_file,
    )
    try:
        async with pool_for(home, config, backend, warm=warm) as pool:
            yield Runtime(
                home=home,
                config=config,
                owner=owner,
                backend=backend,
                audit=AuditLog(home.audit_file),
                slots=None if isinstance(config, ConfigError) else slots_for(home, config),
                pool=pool,
            )
    finally:
        await backend.close()
