"""One shape for the backends' async context managers (a run, a session's egress), and
the one adapter from a backend's egress type to the `EgressFactory` the surfaces call."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Self

from sandboxes.ports import Egress, EgressFactory


class Scoped:
    """`async with thing:` is `await thing.open()`, then `await thing.end(ok)` however the
    block is left (`ok`: without an exception). `open` removes what it made before it
    raises; `end` is shielded and idempotent in each subclass."""

    async def open(self) -> None:
        raise NotImplementedError

    async def end(self, ok: bool) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.end(exc is None)


def egress_factory_of(
    open_egress: Callable[..., AbstractAsyncContextManager[Egress]],
) -> EgressFactory:
    """The factory's keywords handed to a backend's egress type (`SessionEgress`,
    `KubeEgress`, with the backend and proxy image bound): `allowed` as `allowed_hosts`,
    `overrides` as `resolve_override`, and `network`, a pool's network made ahead."""

    @contextlib.asynccontextmanager
    async def make(
        *,
        session_id: str,
        agent: str,
        allowed: tuple[str, ...],
        overrides: dict[str, str],
        network: Any = None,
    ) -> AsyncIterator[Egress]:
        async with open_egress(
            session_id=session_id,
            agent=agent,
            allowed_hosts=allowed,
            resolve_override=overrides,
            network=network,
        ) as egress:
            yield egress

    return make
