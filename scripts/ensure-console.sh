#!/usr/bin/env bash
# What the operator console needs beside Python: noVNC (npm @novnc/novnc, pinned; served
# by the gateway from .cache/novnc, git-ignored) and, for its tests, Debian's Chromium on
# the host (Playwright drives it; its own browser download cannot work here). Idempotent:
# a stamp named after the pin makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

NOVNC_PKG="@novnc/novnc@1.7.0"
DIR=.cache/novnc
. scripts/npm-cache.sh
STAMP=$(npm_cache_stamp "$DIR" "$NOVNC_PKG")

apt_install() {
    if [ "$(id -u)" != 0 ]; then
        echo "ensure-console: $1 is missing and installing it needs root (apt-get install $1)" >&2
        exit 1
    fi
    echo "ensure-console: installing Debian's $1" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null
}

command -v chromium >/dev/null || apt_install chromium
[ -f "$STAMP" ] && exit 0
npm_cache_reset ensure-console "$DIR" "noVNC for the console"
echo "ensure-console: installing $NOVNC_PKG into $DIR" >&2
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "$NOVNC_PKG" >&2
test -f "$DIR/node_modules/@novnc/novnc/core/rfb.js"
touch "$STAMP"
