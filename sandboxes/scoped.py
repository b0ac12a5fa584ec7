"""One shape for corral's async context managers: a container run, a session's egress,
a script run on the host."""

from __future__ import annotations

from types import TracebackType
from typing import Self


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
