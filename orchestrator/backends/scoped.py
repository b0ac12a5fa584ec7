"""The one adapter from a backend's egress type to the `EgressFactory` the surfaces call.
The backends' async context managers (a run, a session's egress) are
`sandboxes.scoped.Scoped`, as the host run is."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from sandboxes.ports import Egress, EgressFactory


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
