"""WebDriverAgent's real route table, read from its own Objective-C source.

The npm package `appium-webdriveragent` (pinned in scripts/ensure-wda.sh, installed into
.cache/wda) ships WDA's source; every route is an `FBRoute` declaration such as
`[[FBRoute POST:@"/wda/tap"] respondWithTarget:...]` or
`[[FBRoute GET:@"/status"].withoutSession.standalone ...]`. Without `.withoutSession`
a route lives under `/session/:sessionID` (WebDriverAgentLib/Routing/FBRoute.m,
FBRouteSessionPrefix). Run as a script, it prints the table.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WDA_SOURCE = ROOT / ".cache" / "wda" / "node_modules" / "appium-webdriveragent"
SESSION_PREFIX = "/session/:sessionID"
_ROUTE_RE = re.compile(
    r"\[\s*FBRoute\s+(GET|POST|PUT|DELETE):\s*@\"([^\"]*)\"\s*\]((?:\s*\.\s*[A-Za-z]+)*)"
)


def route_table(source: Path = WDA_SOURCE) -> set[tuple[str, str]]:
    """(method, path) of every route WDA declares, `:sessionID` for the session."""
    commands = source / "WebDriverAgentLib" / "Commands"
    prefix_file = source / "WebDriverAgentLib" / "Routing" / "FBRoute.m"
    if not commands.is_dir() or not prefix_file.is_file():
        raise FileNotFoundError(f"no WebDriverAgent source at {source}: run scripts/ensure-wda.sh")
    # The session prefix as WDA spells it (so a rename there shows up here).
    match = re.search(r'FBRouteSessionPrefix = @"([^"]+)"', prefix_file.read_text())
    prefix = match.group(1) if match else SESSION_PREFIX
    routes: set[tuple[str, str]] = set()
    for path in sorted(commands.glob("*.m")):
        for method, route, modifiers in _ROUTE_RE.findall(path.read_text(errors="replace")):
            without = "withoutSession" in modifiers
            routes.add((method, route if without else prefix + route))
    return routes


def matches(table: set[tuple[str, str]], method: str, path: str) -> bool:
    """Whether a concrete or pattern path is in the table (`:name` segments are wildcards)."""
    want = path.split("?", 1)[0].rstrip("/").split("/")
    for m, route in table:
        if m != method:
            continue
        have = route.rstrip("/").split("/")
        if len(have) == len(want) and all(
            h == w or h.startswith(":") or w.startswith(":")
            for h, w in zip(have, want, strict=True)
        ):
            return True
    return False


if __name__ == "__main__":
    table = route_table(Path(sys.argv[1]) if len(sys.argv) > 1 else WDA_SOURCE)
    for method, route in sorted(table, key=lambda r: (r[1], r[0])):
        print(f"{method:6} {route}")
    print(f"{len(table)} routes", file=sys.stderr)
