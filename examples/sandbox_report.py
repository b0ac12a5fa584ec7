"""Prints what the corral script sandbox enforces, as seen from inside it.

`make run` runs this through `corral run`; every line is read from the kernel,
not assumed.
"""

import os
import socket
from pathlib import Path


def read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        return f"unreadable ({exc.strerror})"


def status_field(name: str) -> str:
    for line in read("/proc/self/status").splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return "?"


def try_write_root() -> str:
    try:
        Path("/corral-probe").write_text("x")
    except OSError as exc:
        return f"refused ({exc.strerror})"
    return "ALLOWED"


def try_network() -> str:
    # Reads the interface list and the routing table only: this example connects nowhere.
    interfaces = sorted(os.listdir("/sys/class/net"))
    routes = read("/proc/net/route").splitlines()[1:]
    has_socket = hasattr(socket, "AF_INET")
    return f"interfaces {interfaces}; IPv4 routes {len(routes)}; sockets module {has_socket}"


def cgroup(path_v1: str, path_v2: str) -> str:
    value = read(path_v1)
    return value if not value.startswith("unreadable") else read(path_v2)


print(f"uid/gid          : {os.getuid()}/{os.getgid()}")
print(f"capabilities     : CapEff={status_field('CapEff')}")
print(f"no_new_privs     : {status_field('NoNewPrivs')}")
print(f"root filesystem  : write {try_write_root()}")
print(f"network          : {try_network()}")
MEMORY_V1 = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
print(f"memory limit     : {cgroup(MEMORY_V1, '/sys/fs/cgroup/memory.max')}")
print(f"pids limit       : {cgroup('/sys/fs/cgroup/pids/pids.max', '/sys/fs/cgroup/pids.max')}")
print(
    f"cpu quota/period : {cgroup('/sys/fs/cgroup/cpu/cpu.cfs_quota_us', '/sys/fs/cgroup/cpu.max')}"
    f"/{read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')}"
)
print(f"/workspace       : {sorted(os.listdir('/workspace'))}")
print(f"docker socket    : {'PRESENT' if os.path.exists('/var/run/docker.sock') else 'absent'}")
