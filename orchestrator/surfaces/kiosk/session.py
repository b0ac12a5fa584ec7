"""A kiosk session as the gateway holds it: a Surface whose driver is the kiosk agent's
JSON-lines channel (`orchestrator.backends.channel.KioskChannel`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from orchestrator.recordings.recorder import Frame
from orchestrator.surfaces.base import ChannelSurface
from orchestrator.surfaces.screenshots import channel_frame


@dataclass(kw_only=True)
class KioskSession(ChannelSurface):
    kind: ClassVar[str] = "kiosk"

    chromium_sandbox: bool = True

    async def frame(self) -> Frame:
        return await channel_frame(self)
