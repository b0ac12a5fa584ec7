#!/usr/bin/env bash
# Make sure a Docker engine answers. On a machine with none (Debian, root):
# install Debian's docker.io and start dockerd in the background.
# Also makes sure debootstrap is there, which `corral images build` needs to
# make the base image locally (nothing is pulled).
# When this script starts dockerd itself it gives it scripts/dockerd.json: address pools
# big enough for many session networks (Docker's defaults allow ~29) and gVisor's runsc
# registered as a runtime (ptrace platform; its KVM platform hangs in nested VMs). An
# engine someone else started is left as it is: `corral doctor` says what it lacks.
# Idempotent: when the engine already answers this takes ~0.1 s.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

log=${CORRAL_DOCKERD_LOG:-/var/log/corral-dockerd.log}

say() { printf '[setup] %s\n' "$*" >&2; }

engine_up() { docker info >/dev/null 2>&1; }

apt_install() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "missing: $* . Install it (Debian: 'sudo apt-get install $*') and run this again."
    exit 1
  fi
  say "installing $* from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v docker >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v runsc >/dev/null 2>&1 || need+=(runsc)
if [ ${#need[@]} -gt 0 ]; then
  # shellcheck disable=SC2207
  apt_install $(printf '%s\n' "${need[@]}" | sort -u)
fi

if engine_up; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  say "the Docker engine does not answer and you are not root: start it (e.g. 'sudo systemctl start docker') and add yourself to the 'docker' group."
  exit 1
fi

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  say "starting docker with systemctl"
  systemctl start docker || true
fi
if ! engine_up; then
  say "starting dockerd in the background (log: $log)"
  mkdir -p "$(dirname "$log")"
  setsid nohup dockerd --config-file "$here/dockerd.json" >>"$log" 2>&1 < /dev/null &
fi
for _ in $(seq 1 120); do
  if engine_up; then
    say "Docker engine is up: $(docker version --format '{{.Server.Version}}' 2>/dev/null)"
    exit 0
  fi
  sleep 0.5
done
say "dockerd did not answer within 60 s; last lines of $log:"
tail -n 20 "$log" >&2 || true
exit 1
