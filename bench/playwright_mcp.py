"""The real Playwright MCP server (`@playwright/mcp`, npm, pinned in
scripts/ensure-playwright-mcp.sh) as bench/rigs.py's reference: started over stdio by
the same MCP client corral's front is, driving Debian's Chromium headless through
`--executable-path`, on the same site.

Its browser has what corral's rig has to reach the site: the site's name mapped to the
site container (`--host-resolver-rules`) and the site's throwaway CA (here skipped with
`ignoreHTTPSErrors`: Chromium on the host has no per-profile CA store to add it to, and
skipping the check only makes the reference faster). Same viewport as the rig's (1280x800).
It runs as Playwright MCP ships: every action answers with a fresh snapshot, after the
page settles.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from _common import BenchError
from mcp import StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
ENSURE = REPO / "scripts" / "ensure-playwright-mcp.sh"
CLI = REPO / ".cache" / "playwright-mcp" / "node_modules" / "@playwright" / "mcp" / "cli.js"
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1280, 800  # orchestrator.surfaces.browser.start's viewport
_REF = re.compile(r"textbox[^\n]*\[ref=([a-z0-9]+)\]")


def ensure_installed() -> str:
    """Install the pinned package if it is missing (npm); its version."""
    subprocess.run([str(ENSURE)], check=True)
    done = subprocess.run(
        ["node", str(CLI), "--version"], check=True, capture_output=True, text=True
    )
    return done.stdout.strip().split()[-1]


def server_params(workdir: Path, site: str, ip: str) -> StdioServerParameters:
    """Playwright MCP as an MCP client starts it: one server, one isolated headless
    browser, launched at its first tool call."""
    config = workdir / "playwright-mcp.json"
    config.write_text(
        json.dumps(
            {
                "browser": {
                    "browserName": "chromium",
                    "isolated": True,
                    "launchOptions": {
                        "executablePath": CHROMIUM,
                        "headless": True,
                        "args": [f"--host-resolver-rules=MAP {site} {ip}"],
                    },
                    "contextOptions": {
                        "ignoreHTTPSErrors": True,
                        "viewport": {"width": WIDTH, "height": HEIGHT},
                    },
                }
            }
        )
    )
    return StdioServerParameters(
        command="node",
        args=[str(CLI), "--config", str(config), "--output-dir", str(workdir / "out")],
        cwd=str(workdir),
    )


def textbox_ref(snapshot: str) -> str:
    """A textbox's ref in Playwright MCP's snapshot."""
    match = _REF.search(snapshot)
    if match is None:
        shown = ascii(snapshot[:300]).replace("[", "\\[")  # not rich markup
        raise BenchError(f"Playwright MCP's snapshot has no textbox ref: {shown}")
    return match.group(1)


def has_image(result: Any) -> bool:
    return any(getattr(block, "type", "") == "image" for block in result.content)
