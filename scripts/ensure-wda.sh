#!/usr/bin/env bash
# WebDriverAgent's own source, for the fake WDA's route check (tests/simulators/wda_routes.py):
# the npm package appium-webdriveragent, pinned, installed with npm into .cache/wda
# (git-ignored). Idempotent: a stamp named after the pin makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

WDA_PKG="appium-webdriveragent@16.12.7"
DIR=.cache/wda
. scripts/npm-cache.sh
STAMP=$(npm_cache_stamp "$DIR" "$WDA_PKG")

[ -f "$STAMP" ] && exit 0
npm_cache_reset ensure-wda "$DIR" "WebDriverAgent source for tests"
echo "ensure-wda: installing $WDA_PKG into $DIR" >&2
# Only the source files are read: no install scripts (they would build or fetch WDA).
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error --ignore-scripts \
    "$WDA_PKG" >&2
test -d "$DIR/node_modules/appium-webdriveragent/WebDriverAgentLib/Commands"
touch "$STAMP"
