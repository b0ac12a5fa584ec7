"""A kiosk session as the gateway holds it: a Surface whose driver is the kiosk agent's
JSON-lines channel (`orchestrator.channel.KioskChannel`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from orchestrator.channel import KioskChannel
from orchestrator.surfaces.base import Surface


@dataclass(kw_only=True)
class KioskSession(Surface):
    kind: ClassVar[str] = "kiosk"

    channel: KioskChannel
    chromium_sandbox: bool = True

    @property
    def broken(self) -> str | None:
        return self.channel.broken
