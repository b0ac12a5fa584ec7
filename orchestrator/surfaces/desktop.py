"""One desktop rig (SPEC S4.1 `computer_use`): a Linux desktop (Xvfb, openbox, GTK apps,
Chromium) in a locked-down container, driven over the agent's JSON-lines channel
(`rig_images/desktop/desktop_agent.py`, the kiosk agent's protocol, through the same
`KioskChannel`). Screenshots go through `orchestrator.surfaces.screenshots.masked_screenshot`,
the kiosk's own code: password fields (found through AT-SPI) blacked out, an unclear
screen masked whole. Text read from the desktop (window titles, the clipboard) is
fenced as untrusted data.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import ClassVar

import anyio

from orchestrator.backends.channel import KioskChannel
from orchestrator.config import ComputerUseConfig
from orchestrator.errors import CorralError, RigError
from orchestrator.pools.warm import ChannelBody, Warm
from orchestrator.recordings.recorder import Frame
from orchestrator.surfaces.answers import Answer, answer, text_block
from orchestrator.surfaces.base import ChannelSurface, opened
from orchestrator.surfaces.inputs import ACTION_DEADLINE, channel_input
from orchestrator.surfaces.screenshots import channel_frame, masked_screenshot
from orchestrator.surfaces.start import Host, Release, claimed, extra_ca, rig_egress_and_spec
from orchestrator.surfaces.teardown import closed_on_failure
from sandboxes import rig_params as r
from sandboxes.events import CallEvents
from sandboxes.fence import fence
from sandboxes.ports import ContainerSpec, Egress

START_DEADLINE = 60.0
WIDTH, HEIGHT = 1280, 800
COUNTED_VERBS = frozenset(
    {"move", "click", "drag", "scroll", "type", "key", "resize", "clipboard_set"}
)


@dataclass(kw_only=True)
class DesktopRig(ChannelSurface):
    """The desktop's driver is the desktop agent's channel; its seat works as a kiosk's
    (take over, hand back, the timeline in the console)."""

    kind: ClassVar[str] = "desktop"
    # The desktop agent reads every application's accessibility tree twice per screenshot
    # (3 s at most, desktop_mask.WALK_S), then grabs, checks X's windows and encodes the
    # PNG in Python: on two cores beside four busy processes, past 5 s (a series run, r-95).
    screenshot_deadline: ClassVar[float] = 10.0

    def counts(self, verb: r.DesktopVerb) -> bool:
        return verb.verb in COUNTED_VERBS

    async def frame(self) -> Frame:
        return await channel_frame(self)

    async def run(self, verb: r.DesktopVerb, status: str) -> Answer:
        """Do one verb (validated and counted already); the tool answer."""
        req = self.channel.request
        if isinstance(verb, r.DesktopScreenshot):
            return (await masked_screenshot(self, status)).answer
        sent = await channel_input(self.channel, verb.verb, verb, holds_seat=self.ai_holds)
        if sent is not None:  # click, type, key, scroll: the kiosk's own input
            return answer(text_block(f"{sent} {status}"))
        if isinstance(verb, r.DesktopMove):
            await req("move", ACTION_DEADLINE, x=verb.x, y=verb.y)
            done = f"Moved the pointer to {verb.x},{verb.y}."
        elif isinstance(verb, r.DesktopDrag):
            await req("drag", ACTION_DEADLINE, x=verb.x, y=verb.y, to_x=verb.to_x, to_y=verb.to_y)
            done = f"Dragged from {verb.x},{verb.y} to {verb.to_x},{verb.to_y}."
        elif isinstance(verb, r.DesktopResize):
            result = await req(
                "resize", ACTION_DEADLINE, window=verb.window, width=verb.width, height=verb.height
            )
            title = fence(str(result.get("title", "")), "the desktop's window title")
            done = f"Resized a window to {verb.width}x{verb.height}. {status}\n{title}"
            return answer(text_block(done))
        elif isinstance(verb, r.DesktopClipboardSet):
            await req("clipboard_set", ACTION_DEADLINE, text=verb.text)
            done = f"Clipboard set ({len(verb.text)} chars)."
        elif isinstance(verb, r.DesktopClipboardGet):
            result = await req("clipboard_get", ACTION_DEADLINE)
            text = fence(str(result.get("text", "")), "the desktop's clipboard")
            return answer(text_block(f"Clipboard read. {status}\n{text}"))
        else:
            raise RigError(f"computer_use has no handler for verb {verb.verb}")
        return answer(text_block(f"{done} {status}"))

    async def windows(self) -> list[str]:
        result = await self.channel.request("windows", ACTION_DEADLINE)
        return [str(t) for t in result.get("windows", [])]


DesktopBody = ChannelBody  # a started desktop: its agent's channel


async def open_desktop(host: Host, spec: ContainerSpec, proxy_url: str | None) -> DesktopBody:
    """The container of `spec` started, then the agent's `start` (display, D-Bus, openbox,
    x11vnc, Mousepad; its apps' proxy `proxy_url`); removed again if a step fails."""
    channel = await KioskChannel.open(host.backend, spec)
    try:
        ca_pem = await extra_ca(host.config)  # a private CA the egress proxy's sites use
        await channel.request(
            "start", START_DEADLINE, width=WIDTH, height=HEIGHT, proxy=proxy_url, ca_pem=ca_pem
        )
    except BaseException:
        with anyio.CancelScope(shield=True), contextlib.suppress(CorralError):
            await channel.close()
        raise
    return DesktopBody(channel)


async def start_desktop(
    host: Host, rig_id: str, agent: str, cfg: ComputerUseConfig, events: CallEvents, now: float
) -> DesktopRig:
    """A cold start: egress, then the desktop; everything started is removed again if a
    step fails."""
    stack = contextlib.AsyncExitStack()
    async with closed_on_failure(stack):
        image = host.config.container.rigs.desktop_image
        egress, spec = await rig_egress_and_spec(
            stack, host, rig_id, agent, cfg, "desktop", image, events
        )
        await events.progress("display", "starting the desktop", remaining=START_DEADLINE)
        body = await open_desktop(host, spec, egress.proxy_url)
        stack.push_async_callback(body.close)
    return _rig(rig_id, agent, cfg, now, egress, stack, body)


async def claim_desktop(
    host: Host,
    pooled: Warm[DesktopBody],
    agent: str,
    cfg: ComputerUseConfig,
    events: CallEvents,
    now: float,
    release: Release,
) -> DesktopRig:
    """A warm start: a pool's desktop given the rig's egress (its id is the pool
    network's session id)."""
    stack, egress = await claimed(host, pooled, agent, cfg, events, release)
    return _rig(pooled.session_id, agent, cfg, now, egress, stack, pooled.body)


def _rig(
    rig_id: str,
    agent: str,
    cfg: ComputerUseConfig,
    now: float,
    egress: Egress,
    stack: contextlib.AsyncExitStack,
    body: DesktopBody,
) -> DesktopRig:
    return DesktopRig(
        **opened(rig_id, agent, cfg, now, egress),
        width=WIDTH,
        height=HEIGHT,
        stack=stack,
        channel=body.channel,
    )
