"""The phones the mobile rigs lease (SPEC S4.1, S4.4): `[rigs.android] devices` behind
corral's own adb server, and `[rigs.ios]`'s one WebDriverAgent.

One agent holds a device at a time: `start_android` / `start_ios` take a lease, which
the rig manager releases when the rig ends for any reason. A device that is offline,
unauthorized or unreachable is never leased, and a start that fails leaves no lease.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio

from orchestrator.config import ComputerUseConfig, CorralConfig, load_config
from orchestrator.config.rigs import NO_ANDROID, NO_IOS, MobileRigsConfig
from orchestrator.errors import ConfigError, DeviceError, NotAvailable, SessionRefused
from orchestrator.surfaces.android.adb import AdbServer, AndroidDevice
from orchestrator.surfaces.android.rig import AndroidRig
from orchestrator.surfaces.answers import Answer, answer, text_block
from orchestrator.surfaces.base import opened
from orchestrator.surfaces.ios.rig import IosRig
from orchestrator.surfaces.ios.wda import WdaClient
from orchestrator.surfaces.phones import MobileRig

logger = logging.getLogger("corral.devices")

_HINTS = {
    "unauthorized": "accept the USB debugging prompt on the device",
    "offline": "reconnect it or restart adbd on it",
    "missing": "the adb server does not see it: plug it in or check its HOST:PORT",
}


class MobileDevices:
    def __init__(
        self, config: CorralConfig, adb_dir: Path | None = None, config_file: Path | None = None
    ) -> None:
        """`adb_dir`: the private directory of the adb server's socket (CORRAL_HOME/adb).
        `config_file`: the config.toml whose `[rigs]` is followed (`refresh`), as the
        visibility gate follows it: a device added there is usable without a restart."""
        self.android = config.rigs.android
        self.ios = config.rigs.ios
        self.adb_dir = adb_dir
        self.config_file = config_file
        self.adb = AdbServer(self.android, home_dir=adb_dir) if self.android.devices else None
        self.leases: dict[str, str] = {}  # device -> agent

    def follow(self, rigs: MobileRigsConfig) -> None:
        """Use `rigs` from now on. The adb server keeps running; it is told the new
        device list (HOST:PORT devices are connected when next listed)."""
        self.ios = rigs.ios
        if rigs.android == self.android:
            return
        self.android = rigs.android
        if self.adb is not None:
            self.adb.cfg = rigs.android
        elif rigs.android.devices:
            self.adb = AdbServer(rigs.android, home_dir=self.adb_dir)

    async def refresh(self) -> None:
        """Follow config.toml's `[rigs]` as it is now; one that cannot be used changes
        nothing (the gate hides the phone tools meanwhile)."""
        if self.config_file is None:
            return
        try:
            config = await anyio.to_thread.run_sync(load_config, self.config_file)
        except ConfigError as exc:
            logger.warning("config.toml's [rigs] not followed: %s", exc)
            return
        self.follow(config.rigs)

    def release(self, rig: MobileRig) -> None:
        if self.leases.get(rig.device) == rig.agent:
            del self.leases[rig.device]

    async def devices_answer(self, agent: str) -> Answer:
        """`mobile_use devices`: every configured device, its state and who holds it."""
        if self.adb is None or not self.android.devices:
            raise NotAvailable(NO_ANDROID)
        rows = []
        for dev in await self.adb.states():
            holder = self.leases.get(dev.serial)
            held = None if holder is None else ("you" if holder == agent else "another agent")
            rows.append({"device": dev.serial, "state": dev.state, "held_by": held})
        lines = [
            f"{r['device']}: {r['state']}"
            + (f", held by {r['held_by']}" if r["held_by"] else ", free")
            + (f" ({_HINTS[r['state']]})" if r["state"] in _HINTS else "")
            for r in rows
        ]
        return answer(text_block("\n".join(lines)), devices=rows)

    async def start_android(
        self, rig_id: str, agent: str, cfg: ComputerUseConfig, now: float
    ) -> AndroidRig:
        if self.adb is None or not self.android.devices:
            raise NotAvailable(NO_ANDROID)
        states = await self.adb.states()
        client = await self.adb.ensure()
        free = [d for d in states if d.serial not in self.leases and d.state == "device"]
        if not free:
            why = "; ".join(
                f"{d.serial} "
                + ("is held by another agent" if d.serial in self.leases else d.state)
                + (
                    f" ({_HINTS[d.state]})"
                    if d.serial not in self.leases and d.state in _HINTS
                    else ""
                )
                for d in states
            )
            raise SessionRefused(f"no Android device is free: {why}")
        serial = free[0].serial
        self.leases[serial] = agent
        rig = AndroidRig(
            **opened(rig_id, agent, cfg, now),
            device=serial,
            dev=AndroidDevice(client, serial, self.android.timeout_seconds),
            apk_dir=self.android.apk_dir,
        )
        try:
            await rig.size()
        except BaseException:
            self.release(rig)
            raise
        return rig

    async def start_ios(
        self, rig_id: str, agent: str, cfg: ComputerUseConfig, now: float
    ) -> IosRig:
        url = self.ios.wda_url
        if url is None:
            raise NotAvailable(NO_IOS)
        if url in self.leases:
            raise SessionRefused("the iOS simulator is held by another agent; try again later")
        self.leases[url] = agent
        wda = WdaClient(url, self.ios.timeout_seconds)
        rig = IosRig(
            **opened(rig_id, agent, cfg, now),
            device=url,
            wda=wda,
            udid=self.ios.simulator_udid,
            app_dir=self.ios.app_dir,
            timeout=self.ios.timeout_seconds,
        )
        try:
            await wda.open()
            rig.width, rig.height = await wda.window_size()
        except BaseException as exc:
            self.release(rig)
            await wda.close()
            if isinstance(exc, DeviceError):
                raise DeviceError(f"the iOS rig could not start: {exc}") from exc
            raise
        return rig

    async def close(self) -> None:
        self.leases.clear()
        if self.adb is not None:
            await self.adb.close()
