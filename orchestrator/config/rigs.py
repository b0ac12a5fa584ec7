"""`[rigs]`: the devices of the mobile rigs (Android over adb, iOS over WebDriverAgent)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
)

from orchestrator.config.fields import (
    StrictModel,
)

_SERIAL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HOST_PORT_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.-]{0,252}):([0-9]{1,5})$")
_UDID_RE = re.compile(
    r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
)


def _device_entry(value: str) -> str:
    match = _HOST_PORT_RE.fullmatch(value)
    if match is not None:
        if not 1 <= int(match.group(2)) <= 65535:
            raise ValueError(f"{value!r}: the port must be 1-65535")
        return value
    if not _SERIAL_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is neither a device serial (letters, digits, . _ -) nor HOST:PORT"
        )
    return value


def _absolute_dir(value: str | None) -> str | None:
    if value is not None and not Path(value).is_absolute():
        raise ValueError("must be an absolute directory path")
    return value


class AndroidRigConfig(StrictModel):
    """`[rigs.android]`: the devices mobile_use may lease (docs/rigs.md). A serial is a
    device the adb server sees (USB); HOST:PORT is connected with `adb connect`."""

    devices: list[Annotated[str, AfterValidator(_device_entry)]] = Field(
        default_factory=list, max_length=64
    )
    # The only directory `mobile_use install` takes APKs from (by file name).
    apk_dir: Annotated[str | None, AfterValidator(_absolute_dir)] = None
    # The port of corral's own adb server (loopback); unset: a free port. Never 5037,
    # the port of the user's own adb server.
    adb_port: Annotated[int | None, Field(ge=1024, le=65535)] = None
    timeout_seconds: Annotated[int, Field(ge=1, le=600)] = 30

    @field_validator("devices")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a device is listed twice")
        return value

    @field_validator("adb_port")
    @classmethod
    def _private(cls, value: int | None) -> int | None:
        if value == 5037:
            raise ValueError("5037 is the default adb server's port; corral runs its own")
        return value


class IosRigConfig(StrictModel):
    """`[rigs.ios]`: the WebDriverAgent ios_use drives and the simulator it runs in."""

    wda_url: str | None = None
    simulator_udid: str | None = None
    # The only directory `ios_use install` takes .app/.ipa bundles from (by name).
    app_dir: Annotated[str | None, AfterValidator(_absolute_dir)] = None
    timeout_seconds: Annotated[int, Field(ge=1, le=600)] = 30

    @field_validator("wda_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(
            r"https?://[A-Za-z0-9.\[\]:-]+(:[0-9]{1,5})?/?", value
        ):
            raise ValueError("must be http(s)://HOST:PORT, e.g. 'http://127.0.0.1:8100'")
        return value.rstrip("/") if value else value

    @field_validator("simulator_udid")
    @classmethod
    def _udid(cls, value: str | None) -> str | None:
        if value is not None and not _UDID_RE.fullmatch(value):
            raise ValueError("must be a simulator UDID (8-4-4-4-12 hex digits)")
        return value


NO_ANDROID = (
    "mobile_use has no device: list them in config.toml as [rigs.android] devices = "
    '["SERIAL", "HOST:PORT"] (docs/rigs.md)'
)
NO_IOS = (
    "ios_use has no simulator: set [rigs.ios] wda_url (and simulator_udid) in "
    "config.toml (docs/rigs.md)"
)


class MobileRigsConfig(StrictModel):
    """`[rigs]`: the devices of the mobile rigs (docs/rigs.md)."""

    android: AndroidRigConfig = AndroidRigConfig()
    ios: IosRigConfig = IosRigConfig()

    def unavailable(self) -> dict[str, str]:
        """The phone families this server cannot serve, each with why (visible = callable:
        their tools are not listed while nothing is configured for them)."""
        missing = {"mobile_use": NO_ANDROID} if not self.android.devices else {}
        if self.ios.wda_url is None:
            missing["ios_use"] = NO_IOS
        return missing
