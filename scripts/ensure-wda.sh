#!/usr/bin/env bash
# WebDriverAgent's own source, for the fake WDA's route check (tests/simulators/wda_routes.py):
# the npm package appium-webdriveragent, pinned, installed with npm into .cache/wda
# (git-ignored). Idempotent: a stamp named after the pin makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

WDA_PKG="appium-webdriveragent@16.12.7"
DIR=.cache/wda
STAMP="$DIR/.installed-$(printf '%s' "$WDA_PKG" | tr -c 'A-Za-z0-9.+-' '_')"

[ -f "$STAMP" ] && exit 0
if ! command -v npm >/dev/null; then
    echo "ensure-wda: npm is missing; installing Debian's npm" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
rm -rf "$DIR"
mkdir -p "$DIR"
printf '{"private": true, "description": "corral: WebDriverAgent source for tests"}\n' \
    >"$DIR/package.json"
echo "ensure-wda: installing $WDA_PKG into $DIR" >&2
# Only the source files are read: no install scripts (they would build or fetch WDA).
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error --ignore-scripts \
    "$WDA_PKG" >&2
test -d "$DIR/node_modules/appium-webdriveragent/WebDriverAgentLib/Commands"
touch "$STAMP"
