"""SPEC S1.2: every isolation claim, proven by an attack that runs inside the real sandbox.

Where it matters, a control runs the same attack without the protection to show
the attack itself works (so the test could fail).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import docker
import pytest

from orchestrator.home import CorralHome
from orchestrator.runtime import open_runtime
from sandboxes.script import execute_program
from sandboxes.script_policy import parse_params
from tests.images import DEFAULT_SANDBOX_IMAGE
from tests.integration.conftest import (
    RunScript,
    bridge_gateway,
    control_labels,
    host_addresses,
    only_idle_pool_left,
    pool_full,
    write_config,
)

pytestmark = pytest.mark.anyio


# runsc with the pool on is one test (below), to keep gVisor's share of the suite small.
TIERS = [("runc", 0), ("runc", 2), ("runsc", 0)]


@pytest.fixture(params=TIERS, ids=["cold", "warm", "runsc"])
def tier(request: pytest.FixtureRequest) -> tuple[str, int]:
    """Every isolation claim is proven with the warm pool off and on (issue 14): a warm
    container is made by the same `build_script_spec`, only its command differs; and on
    both runtimes, runc and gVisor's runsc (`[container.sandbox] runtime`)."""
    runtime, warm = request.param
    return str(runtime), int(warm)


@pytest.fixture
def warm(tier: tuple[str, int]) -> int:
    return tier[1]


@pytest.fixture
def sandbox_runtime(tier: tuple[str, int]) -> str:
    return tier[0]


@pytest.fixture
def runc_only(sandbox_runtime: str) -> None:
    """For a check that reads the kernel's own view (cgroup files): gVisor's kernel does
    not show the host's cgroups inside, so there is nothing to read under runsc."""
    if sandbox_runtime == "runsc":
        pytest.skip("reads cgroup files, which gVisor does not expose inside the sandbox")


CONNECT_SCRIPT = """
import json, socket, sys
results = {}
for addr in sys.argv[1:] or ADDRS:
    try:
        s = socket.create_connection((addr, PORT), timeout=3)
        results[addr] = "connected:" + s.recv(4).decode()
        s.close()
    except OSError as exc:
        results[addr] = "refused:" + (exc.strerror or type(exc).__name__)
print(json.dumps(results))
"""


async def test_network_has_only_loopback_and_no_route(run_script: RunScript) -> None:
    result = await run_script(
        "import os, json\n"
        "routes = open('/proc/net/route').read().splitlines()[1:]\n"
        "print(json.dumps({'ifaces': sorted(os.listdir('/sys/class/net')), 'routes': routes}))\n"
    )
    assert result.exit_code == 0, result.output
    seen = json.loads(result.output)
    assert seen == {"ifaces": ["lo"], "routes": []}


async def test_localhost_resolves_to_loopback_and_nothing_else_resolves(
    run_script: RunScript,
) -> None:
    """The engine writes no /etc/hosts for a container with no network at all: corral's
    own (read-only) names localhost, so a script's local server and client find each
    other by name; no name server is configured (none is reachable)."""
    result = await run_script(
        "import json, socket\n"
        "server = socket.create_server(('localhost', 0))\n"
        "port = server.getsockname()[1]\n"
        "client = socket.create_connection(('localhost', port), timeout=3)\n"
        "peer, _ = server.accept(); client.sendall(b'hi')\n"
        "got = peer.recv(2).decode()\n"
        "resolv = [l for l in open('/etc/resolv.conf') if l.startswith('nameserver')]\n"
        "try:\n"
        "    open('/etc/hosts', 'a').write('10.0.0.1 bank.example\\n'); hosts = 'written'\n"
        "except OSError as exc:\n"
        "    hosts = exc.strerror\n"
        "try:\n"
        "    socket.getaddrinfo('bank.example', 443); other = 'resolved'\n"
        "except socket.gaierror:\n"
        "    other = 'unresolved'\n"
        "print(json.dumps({'got': got, 'resolv': resolv, 'hosts': hosts, 'other': other}))\n"
    )
    assert result.exit_code == 0, result.output
    seen = json.loads(result.output)
    assert seen.pop("hosts") != "written"
    assert seen == {"got": "hi", "resolv": [], "other": "unresolved"}


async def test_listeners_on_the_hosts_own_addresses_are_unreachable(
    run_script: RunScript, host_listener: int, docker_client: docker.DockerClient
) -> None:
    addrs = host_addresses()
    assert addrs, "this host has no non-loopback IPv4 address to test against"
    code = CONNECT_SCRIPT.replace("ADDRS", repr(addrs)).replace("PORT", str(host_listener))
    result = await run_script(code)
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.output)
    assert set(outcome) == set(addrs)
    assert all(v.startswith("refused:") for v in outcome.values()), outcome

    # Control: the same script in a container WITH a network reaches the listener,
    # so the refusal above is the sandbox's doing, not a dead listener.
    bridge = bridge_gateway()
    control = docker_client.containers.run(
        DEFAULT_SANDBOX_IMAGE,
        ["python3", "-c", code, bridge],
        labels=control_labels("test-control"),
        remove=True,
    )
    assert json.loads(control)[bridge] == "connected:pong"


async def test_root_filesystem_write_is_refused(
    run_script: RunScript, sandbox_runtime: str
) -> None:
    result = await run_script(
        "import json\n"
        "out = {}\n"
        "for path in ['/probe', '/etc/probe', '/usr/bin/probe', '/workspace/probe', "
        "'/home/probe']:\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        out[path] = 'WRITTEN'\n"
        "    except OSError as exc:\n"
        "        out[path] = exc.strerror\n"
        "print(json.dumps(out))\n"
    )
    outcome = json.loads(result.output)
    assert "WRITTEN" not in outcome.values(), outcome
    # gVisor checks the (root-owned) directory's permissions before the read-only mount
    refusals = {"Read-only file system"} | (
        {"Permission denied"} if sandbox_runtime == "runsc" else set()
    )
    assert outcome["/probe"] in refusals
    assert outcome["/workspace/probe"] in refusals


async def test_tmp_is_writable_but_bounded(run_script: RunScript) -> None:
    result = await run_script(
        "import errno\n"
        "written = 0\n"
        "chunk = b'x' * (1024 * 1024)\n"
        "try:\n"
        "    with open('/tmp/fill', 'wb') as fh:\n"
        "        for _ in range(1024):\n"
        "            fh.write(chunk); fh.flush(); written += 1\n"
        "except OSError as exc:\n"
        "    print('stopped', errno.errorcode[exc.errno], written)\n"
        "else:\n"
        "    print('wrote 1 GiB', written)\n"
    )
    assert result.exit_code == 0, result.output
    word, code, mib = result.output.split()
    assert (word, code) == ("stopped", "ENOSPC"), result.output
    assert 1 <= int(mib) <= 64  # the tmpfs is 64 MiB by default


async def test_fork_bomb_stops_at_256_processes_and_the_call_returns(
    run_script: RunScript, sandbox_runtime: str
) -> None:
    result = await run_script(
        "import os, signal\n"
        "children = []\n"
        "while True:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        print('fork refused after', len(children), exc.strerror)\n"
        "        break\n"
        "    if pid == 0:\n"
        "        signal.pause()\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "for pid in children:\n"
        "    os.kill(pid, signal.SIGKILL)\n"
        "for pid in children:\n"
        "    os.waitpid(pid, 0)\n",
        timeout_seconds=60,
    )
    if sandbox_runtime == "runsc":
        # gVisor's processes are its own; the pids limit binds its sentry on the host,
        # which ends the whole sandbox when it cannot grow: contained, the call returns.
        assert result.exit_code != 0 or result.output.startswith("fork refused"), result
        assert not result.timed_out
        return
    assert result.exit_code == 0, result.output
    assert result.output.startswith("fork refused after"), result.output
    forked = int(result.output.split()[3])
    # tini, timeout, sh->python: a few processes exist besides the children.
    assert 200 <= forked < 256, result.output


async def test_shell_fork_bomb_is_contained_and_removed_on_timeout(
    run_script: RunScript, sandbox_runtime: str
) -> None:
    result = await run_script(
        "bomb() { bomb | bomb & }; bomb; sleep 30", language="bash", timeout_seconds=5
    )
    if sandbox_runtime == "runsc":  # the sentry hits the pids limit and ends the sandbox
        assert result.timed_out or (result.exit_code or 0) != 0, result
        assert "sleep" not in result.output
        return
    assert result.timed_out
    assert result.exit_code is None


async def test_memory_hog_is_killed_at_2_gib_and_reported_as_oom(run_script: RunScript) -> None:
    result = await run_script(
        "import os\n"
        "from pathlib import Path\n"
        "limit = Path('/sys/fs/cgroup/memory/memory.limit_in_bytes')\n"
        "print('limit', limit.read_text().strip() if limit.exists() else 'not visible')\n"
        "blocks = []\n"
        "for i in range(48):\n"
        "    blocks.append(bytearray(os.urandom(1)) * (64 * 1024 * 1024))\n"
        "    print('allocated MiB', (i + 1) * 64, flush=True)\n"
        "print('survived')\n",
        timeout_seconds=120,
    )
    assert result.oom_killed, result.output[-500:]
    assert "survived" not in result.output
    last = [line for line in result.output.splitlines() if line.startswith("allocated")][-1]
    assert int(last.split()[-1]) < 2048
    assert "out of memory" in result.to_text()


async def test_runs_as_uid_1000_without_capabilities_and_with_no_new_privileges(
    run_script: RunScript, sandbox_runtime: str
) -> None:
    result = await run_script(
        "import os, json\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "print(json.dumps({'uid': os.getuid(), 'gid': os.getgid(),\n"
        "  'caps': {k: status[k].strip()\n"
        "           for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb') if k in status},\n"
        "  'nnp': status.get('NoNewPrivs', '?').strip()}))\n"
    )
    seen = json.loads(result.output)
    assert (seen["uid"], seen["gid"]) == (1000, 1000)  # the suite runs as root
    assert set(seen["caps"].values()) == {"0000000000000000"}
    assert {"CapPrm", "CapEff", "CapBnd"} <= set(seen["caps"])  # gVisor has no CapAmb line
    # gVisor's /proc does not show NoNewPrivs; the setuid test proves it there.
    assert seen["nnp"] == ("?" if sandbox_runtime == "runsc" else "1")


SETUID_IMAGE = "corral-test-setuid:latest"


@pytest.fixture(scope="module")
def setuid_image(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[str]:
    """The sandbox image plus a setuid-root copy of python3: the attacker's best case."""
    import io

    dockerfile = (
        f"FROM {sandbox_image}\nUSER 0\n"
        "RUN cp /usr/bin/python3 /usr/local/bin/supy && chmod 4755 /usr/local/bin/supy\n"
        "USER 1000:1000\n"
    )
    docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=SETUID_IMAGE, rm=True, pull=False
    )
    yield SETUID_IMAGE
    docker_client.images.remove(SETUID_IMAGE, force=True)


SETUID_PROBE = (
    "import os; os.execv('/usr/local/bin/supy', ['supy', '-c', 'import os; print(os.geteuid())'])"
)


async def test_setuid_binaries_give_no_privilege(
    corral_home: CorralHome,
    setuid_image: str,
    docker_client: docker.DockerClient,
    warm: int,
    sandbox_runtime: str,
) -> None:
    write_config(
        corral_home,
        f'[container.sandbox]\nimage = "{setuid_image}"\nwarm = {warm}\n'
        f'runtime = "{sandbox_runtime}"\n',
    )
    async with open_runtime(corral_home, warm=True) as rt:
        await pool_full(rt)
        result = await execute_program(
            parse_params({"code": SETUID_PROBE}), rt.script_context("test")
        )
    executed = [e for e in rt.audit.read() if e["event"] == "script_executed"]
    assert executed[-1]["details"]["warm"] is (warm > 0)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "1000"
    # Control: without no-new-privileges the same exec does become root.
    control = docker_client.containers.run(
        setuid_image,
        ["python3", "-c", SETUID_PROBE],
        user="1000:1000",
        cap_drop=["ALL"],
        network_mode="none",
        labels=control_labels("test-control"),
        remove=True,
    )
    assert control.decode().strip() == "0"


async def test_no_docker_socket_and_only_workspace_is_mounted_read_only(
    run_script: RunScript, sandbox_runtime: str
) -> None:
    result = await run_script(
        "import json, os\n"
        "mounts = []\n"
        "for line in open('/proc/self/mountinfo'):\n"
        "    left, right = line.split(' - ')\n"
        "    f = left.split(); fstype = right.split()[0]\n"
        "    mounts.append({'point': f[4], 'opts': f[5], 'fstype': fstype})\n"
        "sockets = [p for p in ('/var/run/docker.sock', '/run/docker.sock', "
        "'/run/containerd/containerd.sock') if os.path.exists(p)]\n"
        "print(json.dumps({'mounts': mounts, 'sockets': sockets}))\n"
    )
    seen = json.loads(result.output)
    assert seen["sockets"] == []
    virtual = {"proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "overlay"}
    from_host = {m["point"]: m["opts"] for m in seen["mounts"] if m["fstype"] not in virtual}
    if sandbox_runtime == "runsc":  # gVisor serves the image's root over 9p too, read-only
        assert from_host.pop("/").split(",")[0] == "ro"
    # Docker's own hostname file and corral's hosts file (localhost alone) are the only
    # other disk mounts: with no network the engine writes no hosts nor resolv.conf.
    assert set(from_host) == {"/workspace", "/etc/hostname", "/etc/hosts"}
    assert from_host["/workspace"].split(",")[0] == "ro"
    assert from_host["/etc/hosts"].split(",")[0] == "ro"


async def test_the_script_gets_one_cpu(run_script: RunScript, runc_only: None) -> None:
    result = await run_script(
        "from pathlib import Path\n"
        "v1 = Path('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')\n"
        "if v1.exists():\n"
        "    quota = int(v1.read_text())\n"
        "    period = int(Path('/sys/fs/cgroup/cpu/cpu.cfs_period_us').read_text())\n"
        "else:\n"
        "    q, p = Path('/sys/fs/cgroup/cpu.max').read_text().split()\n"
        "    quota, period = int(q), int(p)\n"
        "print(quota / period)\n"
    )
    assert result.exit_code == 0, result.output
    assert float(result.output) == 1.0


async def test_a_runsc_pool_runs_scripts_in_gvisor_without_a_network(
    corral_home: CorralHome, sandbox_image: str
) -> None:
    """The warm pool under runsc: a claimed container is gVisor's (its kernel reports
    itself as 4.4.0, not the host's) and has only loopback."""
    write_config(corral_home, '[container.sandbox]\nwarm = 1\nruntime = "runsc"\n')
    code = (
        "import json, os, socket\n"
        "print(json.dumps({'release': os.uname().release,\n"
        "  'ifaces': [n for _, n in socket.if_nameindex()]}))\n"
    )
    async with open_runtime(corral_home, warm=True) as rt:
        await pool_full(rt)
        result = await execute_program(parse_params({"code": code}), rt.script_context("test"))
        await only_idle_pool_left(rt)
    executed = [e for e in rt.audit.read() if e["event"] == "script_executed"]
    assert executed[-1]["details"]["warm"] is True
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"release": "4.4.0", "ifaces": ["lo"]}
    assert os.uname().release != "4.4.0"  # control: the host's kernel is not gVisor's
