"""corral's own small WebDriverAgent client (httpx) and its `xcrun simctl` calls.

WebDriverAgent speaks W3C WebDriver JSON over HTTP: replies are `{"value": ...,
"sessionId": ...}`, errors `{"value": {"error", "message", ...}}`. The routes used here
(`ROUTES`) are all in the route table of WDA's own source (its FBRoute declarations);
tests/simulators/wda_routes.py extracts that table and a test checks these against it.
httpx and WDA errors are translated into `DeviceError` in exactly one place,
`map_wda_errors`; simctl runs as an argv (`anyio.run_process`), never through a shell.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import httpx

from orchestrator.errors import DeviceError
from sandboxes.masking import screen_size_error

# (method, path) of every WDA route this client calls; `:sessionID` is the session.
ROUTES = (
    ("GET", "/status"),
    ("POST", "/session"),
    ("DELETE", "/session/:sessionID"),
    ("GET", "/session/:sessionID/source"),
    ("GET", "/session/:sessionID/screenshot"),
    ("GET", "/session/:sessionID/window/size"),
    ("POST", "/session/:sessionID/wda/tap"),
    ("POST", "/session/:sessionID/wda/dragfromtoforduration"),
    ("POST", "/session/:sessionID/wda/keys"),
    ("POST", "/session/:sessionID/wda/pressButton"),
    ("POST", "/session/:sessionID/wda/apps/launch"),
    ("POST", "/session/:sessionID/wda/apps/terminate"),
    ("POST", "/session/:sessionID/url"),
)


@contextlib.asynccontextmanager
async def map_wda_errors(url: str, seconds: float) -> AsyncIterator[None]:
    try:
        with anyio.fail_after(seconds):
            yield
    except TimeoutError as exc:
        raise DeviceError(
            f"WebDriverAgent at {url} did not answer within {seconds:g} s", lost=True
        ) from exc
    except httpx.TimeoutException as exc:
        raise DeviceError(
            f"WebDriverAgent at {url} did not answer within {seconds:g} s", lost=True
        ) from exc
    except httpx.TransportError as exc:
        raise DeviceError(f"WebDriverAgent at {url} is unreachable ({exc})", lost=True) from exc
    except ValueError as exc:  # a body that is not JSON
        raise DeviceError(f"WebDriverAgent at {url} sent a reply that is not JSON") from exc


class WdaClient:
    """One WDA session. `open` creates it; `close` deletes it and the HTTP client."""

    def __init__(self, url: str, timeout: float, transport: httpx.AsyncBaseTransport | None = None):
        self.url = url
        self.timeout = timeout
        self.http = httpx.AsyncClient(base_url=url, timeout=timeout, transport=transport)
        self.session: str | None = None

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        if "/session/:sessionID" in path:
            if self.session is None:
                raise DeviceError("WebDriverAgent: no session is open")
            path = path.replace(":sessionID", self.session)
        async with map_wda_errors(self.url, self.timeout):
            reply = await self.http.request(method, path, json=body)
            data = reply.json()
        value = data.get("value") if isinstance(data, dict) else None
        if isinstance(value, dict) and "error" in value:
            message = str(value.get("message", ""))[:300]
            raise DeviceError(
                f"WebDriverAgent refused {method} {path}: {value['error']}: {message}",
                # WDA restarted (its sessions are gone): this rig cannot go on
                lost=value["error"] == "invalid session id",
            )
        if reply.status_code >= 400:
            raise DeviceError(
                f"WebDriverAgent answered HTTP {reply.status_code} to {method} {path}"
            )
        if isinstance(data, dict) and data.get("sessionId") and self.session is None:
            self.session = str(data["sessionId"])
        return value

    async def open(self) -> None:
        await self.call("GET", "/status")
        await self.call("POST", "/session", {"capabilities": {"alwaysMatch": {}}})
        if self.session is None:
            raise DeviceError("WebDriverAgent created no session (no sessionId in its reply)")

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            if self.session is not None:
                with contextlib.suppress(DeviceError, httpx.HTTPError):
                    await self.call("DELETE", "/session/:sessionID")
            self.session = None
            await self.http.aclose()

    async def source(self) -> str:
        value = await self.call("GET", "/session/:sessionID/source?format=xml")
        if not isinstance(value, str):
            raise DeviceError("WebDriverAgent's source is not XML text")
        return value

    async def screenshot(self) -> bytes:
        value = await self.call("GET", "/session/:sessionID/screenshot")
        try:
            return base64.b64decode(str(value), validate=True)
        except ValueError as exc:
            raise DeviceError("WebDriverAgent's screenshot is not base64") from exc

    async def window_size(self) -> tuple[int, int]:
        value = await self.call("GET", "/session/:sessionID/window/size")
        try:
            size = int(value["width"]), int(value["height"])
        except (TypeError, KeyError, ValueError, OverflowError) as exc:
            raise DeviceError("WebDriverAgent's window size is unreadable") from exc
        if (why := screen_size_error(size)) is not None:
            raise DeviceError(f"WebDriverAgent's window cannot be used: {why}")
        return size

    async def tap(self, x: int, y: int) -> None:
        await self.call("POST", "/session/:sessionID/wda/tap", {"x": x, "y": y})

    async def drag(self, x: int, y: int, to_x: int, to_y: int, seconds: float) -> None:
        body = {"fromX": x, "fromY": y, "toX": to_x, "toY": to_y, "duration": seconds}
        await self.call("POST", "/session/:sessionID/wda/dragfromtoforduration", body)

    async def keys(self, text: str) -> None:
        await self.call("POST", "/session/:sessionID/wda/keys", {"value": list(text)})

    async def press_button(self, name: str) -> None:
        await self.call("POST", "/session/:sessionID/wda/pressButton", {"name": name})

    async def launch(self, bundle_id: str) -> None:
        await self.call("POST", "/session/:sessionID/wda/apps/launch", {"bundleId": bundle_id})

    async def terminate(self, bundle_id: str) -> bool:
        value = await self.call(
            "POST", "/session/:sessionID/wda/apps/terminate", {"bundleId": bundle_id}
        )
        return bool(value)

    async def open_url(self, url: str) -> None:
        await self.call("POST", "/session/:sessionID/url", {"url": url})


async def simctl(argv: Sequence[str], seconds: float) -> str:
    """`xcrun simctl ARGV` (macOS; a fake `xcrun` on PATH in tests). Output, or DeviceError."""
    xcrun = shutil.which("xcrun")
    if xcrun is None:
        raise DeviceError(
            "this verb needs `xcrun simctl`, which only macOS with Xcode has; this host has "
            "no xcrun on PATH (docs/rigs.md)"
        )
    try:
        with anyio.fail_after(seconds):
            done = await anyio.run_process([xcrun, "simctl", *argv], check=False)
    except TimeoutError as exc:
        raise DeviceError(f"xcrun simctl {argv[0]} did not finish within {seconds:g} s") from exc
    out = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise DeviceError(f"xcrun simctl {argv[0]} failed (exit {done.returncode}): {out[:500]}")
    return out
