"""What both backends' egress share (SPEC S2.6): the allowlist pinned once at the start,
and narrowing it later over the proxy's control channel. A backend's egress
(`docker.egress.SessionEgress`, `kubernetes.egress.KubeEgress`) adds how the proxy and
its fences are made and removed (`open`, `end`) and what narrowing changes besides the
proxy's own pins (`_narrowed`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.pins import resolve_pins
from orchestrator.errors import KioskError
from sandboxes.scoped import Scoped

CONTROL_DEADLINE = 10.0
CHECK_DEADLINE = 3.0  # a proxy that answers nothing for this long is taken for gone


class PinnedEgress(Scoped):
    """The `Egress` attributes every backend fills: `pins`, `left_out`, `network_name`,
    `proxy_url` (None until a proxy answers), and `restrict`."""

    def __init__(
        self,
        session_id: str,
        agent: str,
        allowed_hosts: Sequence[str],
        resolve_override: Mapping[str, str] | None,
        image: str,
    ) -> None:
        self.session_id = session_id
        self.agent = agent
        self._allowed = list(allowed_hosts)
        self._override = dict(resolve_override or {})
        self.image = image
        self.pins: dict[str, tuple[str, ...]] = {}
        self.left_out: dict[str, str] = {}
        self.network_name: str | None = None
        self.proxy_url: str | None = None
        self._control: KioskChannel | None = None  # the proxy's stdin/stdout, once it runs

    async def _pin(self) -> bool:
        """Resolve the allowlist once (`resolve_pins`); whether any host got a pin."""
        self.pins, self.left_out = await resolve_pins(self._allowed, self._override)
        return bool(self.pins)

    async def restrict(self, hosts: Sequence[str]) -> None:
        """Keep only `hosts` of the pinned ones: the proxy drops every other host's pins and
        closes its open tunnels. Never adds a host (one not pinned at start stays out)."""
        if self._control is None:
            self.pins = {h: a for h, a in self.pins.items() if h in hosts}
            return
        answer = await self._control.request("restrict", CONTROL_DEADLINE, hosts=list(hosts))
        kept = {str(h) for h in answer.get("hosts", [])}
        self.pins = {h: a for h, a in self.pins.items() if h in kept}
        await self._narrowed()

    async def check(self) -> str | None:
        """Why the proxy is gone, or None: any answer to a control line, even a refusal
        of an op it does not know, is a proxy that runs."""
        if self._control is None:
            return None
        with contextlib.suppress(KioskError):
            await self._control.request("check", CHECK_DEADLINE)
        return self._control.broken

    async def _narrowed(self) -> None:
        """What else follows the proxy's narrower pins on this backend (nothing here)."""
