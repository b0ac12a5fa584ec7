#!/usr/bin/env bash
# Sourced by the scripts/ensure-*.sh that install pinned npm packages into a git-ignored
# directory under .cache: the stamp named after the pins (a second run is a no-op,
# changing a pin installs again), npm itself from Debian when it is missing, and a fresh
# directory with its package.json.

# npm_cache_stamp DIR PINS: the stamp file that says PINS are installed in DIR.
npm_cache_stamp() {
    printf '%s/.installed-%s' "$1" "$(printf '%s' "$2" | tr -c 'A-Za-z0-9.+-' '_')"
}

# npm_cache_reset NAME DIR DESCRIPTION: npm present (installing Debian's if root may),
# DIR emptied and given a private package.json.
npm_cache_reset() {
    if ! command -v npm >/dev/null; then
        if [ "$(id -u)" != 0 ]; then
            echo "$1: npm is missing and installing it needs root (apt-get install npm)" >&2
            exit 1
        fi
        echo "$1: npm is missing; installing Debian's npm" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
    fi
    rm -rf "$2"
    mkdir -p "$2"
    printf '{"private": true, "description": "corral: %s"}\n' "$3" >"$2/package.json"
}
