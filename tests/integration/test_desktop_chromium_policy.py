"""The desktop rig's Chromium runs under the kiosk's managed policy: a page the policy
forbids (the container's files, Chromium's own pages, devtools) does not
load, whoever asks for it. Driven here through the desktop agent's own CDP pipe (the way
codrive's open_url does, without the gateway's https-only check in front), on the real
image with the rig's hardening."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from orchestrator.backends.channel import KioskChannel
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.errors import KioskError
from tests.integration.conftest import desktop_rig

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
async def desktop(backend: DockerBackend) -> AsyncIterator[KioskChannel]:
    async with desktop_rig(backend, "policy", ("chromium",)) as channel:
        yield channel


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "file:///home/sandbox/",
        "chrome://settings/",
        "chrome://version/",
        "devtools://devtools/bundled/inspector.html",
    ],
)
async def test_a_page_the_policy_forbids_does_not_load(desktop: KioskChannel, url: str) -> None:
    with pytest.raises(KioskError, match="ERR_BLOCKED_BY_ADMINISTRATOR"):
        await desktop.request("browser", 20, what="open_url", url=url)


async def test_an_ordinary_page_still_loads(desktop: KioskChannel) -> None:
    """The control: the same path opens a page the policy allows."""
    await desktop.request("browser", 20, what="open_url", url="about:blank#corral")
    where = await desktop.request("where", 10, app="chromium")
    assert where["url"] == "about:blank#corral"
