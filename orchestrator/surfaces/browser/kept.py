"""A CDP session of the secret-field probe that keeps its walk between probes.

A probe walks a session's documents (`sandboxes.secret_fields.walk`: the whole pierced
DOM, the costly part) and leaves the DOM domain enabled, so the renderer tells the
session of every change to the nodes it walked. While no event that stales a walk
(`sandboxes.kept_walk.stales`) has come, the next probe asks only what can change
without one: the style of the walked fields, their boxes and their values, after
checking that the root is still the same document.

Why this is as safe as walking afresh: the renderer sends a session's events before its
answer to any later call, and the bridge hands them on in that order (each event's
handler runs before the next message is read, `cdp.CdpBridge._own`), so once the
last answer of a probe is in, every change made before it has been counted. A probe
that used a kept walk and saw the count move is thrown away and done again from a fresh
walk; a fresh walk is kept only if nothing came while it ran. A kept walk that goes
stale is let go at once (the domain disabled, the handles released), so a changing page
does not stream events to the gateway; so is one past `QUIET_AFTER` events that do not
stale it (a busy page).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import anyio

from orchestrator.errors import CdpCallFailed
from orchestrator.surfaces.browser.at_once import both
from orchestrator.surfaces.browser.direct import DirectSession
from sandboxes import kept_walk as kw
from sandboxes import secret_fields as sf

NOT_ENABLED = "hasn't been enabled"  # Chromium: a domain disabled already
_pending: set[asyncio.Task[None]] = set()  # let-go tasks, held until done
R = TypeVar("R")
Use = Callable[[tuple[sf.Field, ...]], Awaitable[R]]  # what a read does with the fields


def sender(session: DirectSession) -> Callable[[sf.Call], Awaitable[dict[str, Any]]]:
    async def send(call: sf.Call) -> dict[str, Any]:
        try:
            return await session.send(call.method, call.params)
        except CdpCallFailed as exc:
            raise sf.CallFailed(str(exc).splitlines()[0][:200]) from exc

    return send


@dataclass(eq=False)
class Found:
    """What one read of a session found: its secret fields and how many frames its
    documents hold (the walk's root's included)."""

    fields: tuple[sf.Field, ...]
    frames: int


@dataclass(eq=False)
class KeptSession:
    """One probe session and the walk it keeps (see the module's docstring). Probes on
    it take turns on `lock` (its page's)."""

    session: DirectSession
    lock: anyio.Lock
    walk: sf.Walk | None = None
    handles: sf.Handles = field(default_factory=sf.Handles)
    staled: int = 0  # events seen that stale a walk (and busy-page overflows)
    passing: int = 0  # other events since the kept walk was taken
    mark: int = 0  # `staled` when the kept walk was begun
    fresh_walks: int = 0  # walks taken (for the tests and the benchmarks)
    unread: set[int] = field(default_factory=set)  # nodes the walk did not read
    secret: tuple[sf.Field, ...] = ()  # the secret fields the last read found

    def __post_init__(self) -> None:
        for name in (*kw.STALING_EVENTS, *kw.PASSING_EVENTS):
            self.session.on(name, partial(self._event, name))

    @property
    def kept(self) -> bool:
        return self.walk is not None and self.staled == self.mark

    def _event(self, name: str, params: dict[str, Any]) -> None:
        if not kw.stales(name, params, self.unread):
            self.passing += 1
            if self.passing <= kw.QUIET_AFTER:
                return
        self.staled += 1
        if self.walk is not None and self.staled == self.mark + 1:  # just went stale
            task = asyncio.get_running_loop().create_task(self._let_go_when_stale())
            _pending.add(task)
            task.add_done_callback(_pending.discard)

    async def _let_go_when_stale(self) -> None:
        async with self.lock:
            if self.walk is not None and not self.kept:
                await self.let_go()

    async def let_go(self) -> bool:
        """Stop keeping the walk: the DOM domain off (no more events), the handles
        released. False when the session failed (the caller drops it)."""
        self.walk, self.handles = None, sf.Handles()
        failed: list[str] = []

        async def send(method: str, params: dict[str, Any] | None = None) -> None:
            try:
                await self.session.send(method, params)
            except CdpCallFailed as exc:
                if NOT_ENABLED not in str(exc):
                    failed.append(method)

        with anyio.CancelScope(shield=True):
            await both(
                lambda: send("DOM.disable"),
                lambda: send("Runtime.releaseObjectGroup", {"objectGroup": sf.OBJECT_GROUP}),
            )
        return not failed

    async def read(self, use: Use[R]) -> tuple[Found, R]:
        """The session's secret fields and what `use` made of them (their boxes, their
        values) inside the same read: from the kept walk when it still holds through the
        last answer, else from a fresh walk (`use` then runs again on its fields)."""
        if self.kept:
            mark = self.staled
            try:
                found, made = await self._again(use)
            except sf.ProbeError:  # a walk gone, a field that failed: walked afresh below
                pass
            else:
                if self.staled == mark:
                    self.passing = 0
                    return found, made
        return await self._fresh(use)

    async def _again(self, use: Use[R]) -> tuple[Found, R]:
        """From the kept walk: its fields' style asked again and, at the same time, `use`
        done on the fields the last read found secret (then again, should the secret
        ones not be those now)."""
        assert self.walk is not None
        walked, last, send = self.walk, self.secret, sender(self.session)
        (fields, frames), made = await both(
            lambda: sf.run_async(kw.styled_again(walked), send), lambda: use(last)
        )
        made = made if fields == last else await use(fields)
        self.secret = fields
        return Found(fields, frames), made

    async def _fresh(self, use: Use[R]) -> tuple[Found, R]:
        send = sender(self.session)
        if self.handles.objects or self.handles.worlds:
            self.handles = sf.Handles()
            await send(sf.Call("Runtime.releaseObjectGroup", {"objectGroup": sf.OBJECT_GROUP}))
        mark, self.walk, self.passing = self.staled, None, 0
        self.fresh_walks += 1
        walked = await sf.run_async(sf.walk(None, closed_only=False), send)
        self.unread = kw.node_ids(walked.browsers)
        fields = await sf.run_async(sf.styled(walked), send)
        made = await use(fields)
        if self.staled == mark:
            self.walk, self.mark, self.secret = walked, mark, fields
        elif not await self.let_go():
            raise sf.ProbeError("the page's CDP session failed")
        return Found(fields, walked.frames), made
