#!/usr/bin/env bash
# The real Playwright MCP server, for bench/rigs.py's side-by-side rows (issue 23): the npm
# package @playwright/mcp, pinned, installed with npm into .cache/playwright-mcp
# (git-ignored). No browser is downloaded (install scripts off): it drives Debian's
# Chromium through --executable-path. Idempotent: a stamp named after the pin makes a
# second run a no-op; changing the pin installs again. Only `make bench` needs it.
set -euo pipefail
cd "$(dirname "$0")/.."

PKG="@playwright/mcp@0.0.86"
DIR=.cache/playwright-mcp
. scripts/npm-cache.sh
STAMP=$(npm_cache_stamp "$DIR" "$PKG")

[ -f "$STAMP" ] && exit 0
npm_cache_reset ensure-playwright-mcp "$DIR" "Playwright MCP for the benchmarks"
echo "ensure-playwright-mcp: installing $PKG into $DIR" >&2
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error --ignore-scripts "$PKG" >&2
node "$DIR/node_modules/@playwright/mcp/cli.js" --version >/dev/null
touch "$STAMP"
