"""A kiosk session as the gateway holds it: a Surface whose driver is the kiosk agent's
JSON-lines channel (`orchestrator.channel.KioskChannel`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from orchestrator.surfaces.base import ChannelSurface


@dataclass(kw_only=True)
class KioskSession(ChannelSurface):
    kind: ClassVar[str] = "kiosk"

    chromium_sandbox: bool = True
