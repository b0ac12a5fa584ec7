"""The phone rigs against a real device or simulator, when one is configured:
CORRAL_ANDROID_SERIAL (a serial the host's USB sees, or HOST:PORT for `adb connect`) and
CORRAL_WDA_URL (a running WebDriverAgent, e.g. http://127.0.0.1:8100). Without them these
tests skip and say so; they only read the screen and the UI tree, and press HOME."""

from __future__ import annotations

import os

import pytest

from orchestrator.config import ComputerUseConfig, CorralConfig
from orchestrator.surfaces.devices import MobileDevices
from sandboxes.mobile_params import IosUseParams, MobileUseParams

pytestmark = [pytest.mark.anyio, pytest.mark.mobile]

SERIAL = os.environ.get("CORRAL_ANDROID_SERIAL")
WDA_URL = os.environ.get("CORRAL_WDA_URL")


@pytest.mark.skipif(
    not SERIAL, reason="no real Android device: set CORRAL_ANDROID_SERIAL to run this test"
)
async def test_a_real_android_device_is_inspected_and_captured() -> None:
    pool = MobileDevices(CorralConfig.model_validate({"rigs": {"android": {"devices": [SERIAL]}}}))
    try:
        listed = await pool.devices_answer("alice")
        assert listed.structured["devices"][0]["state"] == "device", listed
        rig = await pool.start_android("r1", "alice", ComputerUseConfig(), 0.0)
        assert rig.width > 0 and rig.height > 0
        tree = await rig.run(MobileUseParams.parse_verbs({"verb": "inspect"}).verb, "")
        assert tree.structured["elements"] > 0
        shot = await rig.run(MobileUseParams.parse_verbs({"verb": "screenshot"}).verb, "")
        assert len(shot.images) == 1
        assert not shot.structured["masked"], shot.structured["mask_reason"]
        await rig.run(MobileUseParams.parse_verbs({"verb": "key", "key": "HOME"}).verb, "")
    finally:
        await pool.close()


@pytest.mark.skipif(
    not WDA_URL, reason="no real WebDriverAgent: set CORRAL_WDA_URL to run this test"
)
async def test_a_real_webdriveragent_is_inspected_and_captured() -> None:
    pool = MobileDevices(CorralConfig.model_validate({"rigs": {"ios": {"wda_url": WDA_URL}}}))
    rig = await pool.start_ios("r1", "alice", ComputerUseConfig(), 0.0)
    try:
        tree = await rig.run(IosUseParams.parse_verbs({"verb": "inspect"}).verb, "")
        assert tree.structured["elements"] > 0
        shot = await rig.run(IosUseParams.parse_verbs({"verb": "screenshot"}).verb, "")
        assert len(shot.images) == 1
        assert not shot.structured["masked"], shot.structured["mask_reason"]
    finally:
        await rig.close()
        await pool.close()
