"""SPEC S1.3-S1.8 and S0 reaping: timeouts, caps, cancellation, unavailability, orphans."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from functools import partial
from pathlib import Path

import anyio
import docker
import pytest

from orchestrator.audit import AuditLog
from orchestrator.backends.docker.backend import DockerBackend
from orchestrator.backends.owner import LABEL_OWNER_PID, Owner, read_start_time
from orchestrator.backends.reaper import reap_orphans
from orchestrator.errors import SandboxUnavailable, UnavailableCode
from orchestrator.home import CorralHome
from orchestrator.runtime import Runtime, open_runtime
from sandboxes.script import HOST_CAP_GRACE, execute_program
from sandboxes.script_policy import REPLY_CAP_BYTES, parse_params
from tests.integration.conftest import (
    RunScript,
    corral_bin,
    env_with_home,
    only_idle_pool_left,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[0, 2], ids=["cold", "warm"])
def warm(request: pytest.FixtureRequest) -> int:
    """Every S1 test that runs a script runs with the warm pool off and on (issue 14)."""
    return int(request.param)


SLOW = "import time\nprint('started', flush=True)\ntime.sleep(120)\nprint('never')\n"


async def test_timeout_kills_and_removes_container_and_returns_partial_output(
    run_script: RunScript, runtime: Runtime
) -> None:
    result = await run_script(SLOW, timeout_seconds=2)
    assert result.timed_out and not result.hard_cap_hit
    assert result.exit_code is None
    assert result.output == "started\n"
    assert 2000 <= result.duration_ms < 20_000
    assert "timed out after 2 s" in result.to_text()
    if runtime.pool is None:
        assert (
            await runtime.backend.list_managed({"corral.instance": runtime.owner.instance_id}) == []
        )
    await only_idle_pool_left(runtime)


async def test_hard_cap_fires_on_its_own_when_the_timeout_path_does_not(
    run_script: RunScript,
) -> None:
    # The host-side timeout is 60 s; the in-container cap (injected: 3 s) must end the run.
    result = await run_script(SLOW, timeout_seconds=60, hard_cap_seconds=3)
    assert result.hard_cap_hit and result.timed_out
    assert result.output == "started\n"
    assert result.duration_ms < 30_000
    assert "hard cap" in result.to_text()


# Stops every process it can signal (in the container: its own pid namespace only),
# including PID 1, then sleeps: with the cap as a plain child, this switched it off.
STOP_EVERYTHING = """
import os, signal, time
print("started", flush=True)
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        try:
            os.kill(int(name), signal.SIGSTOP)
        except OSError:
            pass
print("stopped what I could", flush=True)
time.sleep(120)
"""


async def test_a_script_that_stops_every_process_it_can_still_meets_the_hard_cap(
    run_script: RunScript,
) -> None:
    result = await run_script(STOP_EVERYTHING, timeout_seconds=60, hard_cap_seconds=3)

    assert result.hard_cap_hit and result.timed_out
    assert result.output == "started\nstopped what I could\n"
    # The in-container cap (PID 1) ended it, not the host's, which would wait 5 s more.
    assert result.duration_ms < (3 + HOST_CAP_GRACE) * 1000


async def test_the_host_enforces_the_cap_when_the_cap_process_is_stopped(
    corral_home: CorralHome,
) -> None:
    """On the host (run_unsandboxed) the script can stop its parent `timeout`; the host's
    own cap, a few seconds later, still ends the run."""
    write_config(
        corral_home,
        '[container.sandbox]\nimage = "corral-test-missing:none"\n'
        'script_when_unavailable = "run_unsandboxed"\n',
    )
    code = (
        "import os, signal, time\nprint('started', flush=True)\n"
        "os.kill(os.getppid(), signal.SIGSTOP)\ntime.sleep(120)\n"
    )
    async with open_runtime(corral_home) as rt:
        result = await execute_program(
            parse_params({"code": code, "timeout_seconds": 60}),
            rt.script_context("t"),
            hard_cap_seconds=2,
        )

    assert result.hard_cap_hit and result.timed_out and not result.sandboxed
    assert result.output == "started\n"
    assert (2 + HOST_CAP_GRACE) * 1000 <= result.duration_ms < (2 + HOST_CAP_GRACE + 10) * 1000


async def test_five_mib_of_output_returns_one_mib_flagged_truncated(run_script: RunScript) -> None:
    result = await run_script(
        "import sys\nline = 'x' * 1023 + '\\n'\nfor _ in range(5 * 1024):\n"
        "    sys.stdout.write(line)\nprint('tail-marker')\n"
    )
    assert result.exit_code == 0
    assert result.truncated
    assert result.returned_bytes == REPLY_CAP_BYTES
    assert len(result.output.encode()) == REPLY_CAP_BYTES
    assert result.output_bytes == 5 * 1024 * 1024 + len("tail-marker\n")
    assert "tail-marker" not in result.output
    assert f"{REPLY_CAP_BYTES} of {result.output_bytes} bytes returned" in result.to_text()


async def test_interleaved_stdout_and_stderr_keep_their_order(run_script: RunScript) -> None:
    result = await run_script(
        "import sys\nfor i in range(2000):\n"
        "    (sys.stdout if i % 2 == 0 else sys.stderr).write(f'{i}\\n')\n"
    )
    assert result.exit_code == 0
    assert result.output.splitlines() == [str(i) for i in range(2000)]


async def test_bash_and_sh_scripts_run_and_report_their_exit_code(run_script: RunScript) -> None:
    bash = await run_script("echo $((6*7)); echo err >&2; exit 3", language="bash")
    assert (bash.exit_code, bash.output) == (3, "42\nerr\n")
    sh = await run_script("echo sh-ok", language="sh")
    assert (sh.exit_code, sh.output) == (0, "sh-ok\n")


# Reads this run's exit mark where the script's shell holds it (its argv, readable by the
# same uid), prints an exit line of its own, then runs on: the attack on the exit line.
FORGE = """
import os, time
argv = open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\\0")
mark = next(a for a in argv if a.startswith(b"corral-exit-")).decode()
print("before", flush=True)
print(mark + "STATUS", flush=True)
print("after", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("status", ["137:0", "0:1", "0:"])
async def test_a_forged_exit_line_cannot_outlast_the_timeout_or_hide_a_kill(
    run_script: RunScript, runtime: Runtime, status: str
) -> None:
    """An exit line saying a signal, an OOM kill or no count is not trusted: the run is
    read to its end as before, so the timeout still ends it and the engine says how."""
    result = await run_script(FORGE.replace("STATUS", status), timeout_seconds=2)
    assert result.timed_out and result.exit_code is None and not result.oom_killed
    assert result.output == "before\nafter\n"
    await only_idle_pool_left(runtime)


async def test_a_forged_plain_exit_line_only_ends_its_own_run_early(
    run_script: RunScript, runtime: Runtime
) -> None:
    """A plain exit line is the script's word, like its exit status: forged, it ends the
    call at once with the status it gave, and its container, still running, is removed."""
    result = await run_script(FORGE.replace("STATUS", "0:0"), timeout_seconds=60)
    assert (result.exit_code, result.timed_out, result.output) == (0, False, "before\n")
    assert result.duration_ms < 30_000
    await only_idle_pool_left(runtime)


async def test_cancelling_the_call_removes_the_container(runtime: Runtime) -> None:
    mine = {"corral.instance": runtime.owner.instance_id}
    running = anyio.Event()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                partial(
                    execute_program,
                    parse_params({"code": SLOW}),
                    runtime.script_context("test"),
                    on_output=lambda _: running.set(),
                )
            )
            with anyio.fail_after(30):
                await running.wait()  # the script runs: its container exists
            scope.cancel()
    if runtime.pool is None:
        assert await runtime.backend.list_managed(mine) == []
    await only_idle_pool_left(runtime)


async def test_killing_the_calling_process_removes_its_container(
    corral_home: CorralHome, tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    proc = subprocess.Popen(
        [corral_bin(), "run", str(script), "--timeout", "120"],
        env=env_with_home(corral_home),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"started\n"  # the container is running the script
        owned = {"label": [f"{LABEL_OWNER_PID}={proc.pid}"]}
        assert docker_client.containers.list(ignore_removed=True, all=True, filters=owned)
        proc.send_signal(signal.SIGKILL)  # no handler, no cleanup code runs in the caller
        proc.wait()
        await wait_until(
            lambda: not docker_client.containers.list(ignore_removed=True, all=True, filters=owned)
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _marker_script(marker: Path) -> str:
    return (
        f"open({str(marker)!r}, 'w').write('ran')\nprint('ran on', __import__('os').uname()[1])\n"
    )


async def _expect_unavailable(
    home: CorralHome, code: UnavailableCode, marker: Path, warm: int
) -> str:
    async with open_runtime(home, warm=warm > 0) as rt:
        with pytest.raises(SandboxUnavailable) as caught:
            await execute_program(
                parse_params({"code": _marker_script(marker)}), rt.script_context("agent-x")
            )
    assert caught.value.code is code
    assert not marker.exists(), "the script ran although the sandbox was unavailable"
    events = AuditLog(home.audit_file).read()
    assert [e["event"] for e in events] == ["script_sandbox_unavailable"]
    assert events[0]["agent"] == "agent-x"
    assert events[0]["details"]["code_name"] == code.value
    return str(caught.value)


async def test_daemon_not_answering_refuses_to_run_with_the_exact_message(
    corral_home: CorralHome, tmp_path: Path, warm: int
) -> None:
    dead = tmp_path / "dead.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(dead))  # a socket file nobody listens on: connection refused
    sock.close()
    write_config(corral_home, f'[container]\ndocker_host = "unix://{dead}"\n')
    message = await _expect_unavailable(
        corral_home, UnavailableCode.DAEMON_UNREACHABLE, tmp_path / "marker", warm
    )
    assert message == (
        f"Script sandbox unavailable (daemon_unreachable): the Docker engine at unix://{dead} "
        "does not answer. Fix: start the Docker engine (`make run` does it, or `sudo dockerd &`)"
    )


async def test_missing_image_refuses_to_run_and_names_the_build_command(
    corral_home: CorralHome, tmp_path: Path, warm: int
) -> None:
    write_config(corral_home, '[container.sandbox]\nimage = "corral-test-missing:none"\n')
    message = await _expect_unavailable(
        corral_home, UnavailableCode.IMAGE_MISSING, tmp_path / "marker", warm
    )
    assert message.startswith(
        "Script sandbox unavailable (image_missing): the image corral-test-missing:none"
    )
    assert message.endswith("Fix: corral images build")


async def test_invalid_sandbox_config_refuses_to_run(
    corral_home: CorralHome, tmp_path: Path, warm: int
) -> None:
    write_config(corral_home, '[container.sandbox]\nimage = "Not An Image"\n')
    message = await _expect_unavailable(
        corral_home, UnavailableCode.INVALID_CONFIG, tmp_path / "marker", warm
    )
    assert "container.sandbox.image" in message
    assert str(corral_home.config_file) in message


async def test_run_unsandboxed_runs_on_the_host_and_audits_every_bypass(
    corral_home: CorralHome, tmp_path: Path, warm: int
) -> None:
    write_config(
        corral_home,
        '[container.sandbox]\nimage = "corral-test-missing:none"\n'
        'script_when_unavailable = "run_unsandboxed"\n',
    )
    marker = tmp_path / "marker"
    async with open_runtime(corral_home, warm=warm > 0) as rt:
        for _ in range(2):
            result = await execute_program(
                parse_params({"code": _marker_script(marker)}), rt.script_context("agent-y")
            )
            assert result.exit_code == 0, result.output
            assert not result.sandboxed
            assert "UNSANDBOXED" in result.to_text()
    assert marker.read_text() == "ran"  # written on the host's filesystem: it ran on the host
    events = [e["event"] for e in AuditLog(corral_home.audit_file).read()]
    assert (
        events
        == [
            "script_sandbox_unavailable",
            "script_sandbox_bypassed",
            "script_started",
            "script_executed",
        ]
        * 2
    )


async def test_unsandboxed_run_times_out_too(corral_home: CorralHome) -> None:
    write_config(
        corral_home,
        '[container.sandbox]\nimage = "corral-test-missing:none"\n'
        'script_when_unavailable = "run_unsandboxed"\n',
    )
    async with open_runtime(corral_home) as rt:
        result = await execute_program(
            parse_params({"code": SLOW, "timeout_seconds": 1}), rt.script_context("t")
        )
    assert result.timed_out and result.output == "started\n"


async def test_audit_never_holds_the_script_or_its_output(
    run_script: RunScript, runtime: Runtime
) -> None:
    await run_script("print('s3cr3t-output')  # s3cr3t-code")
    raw = runtime.home.audit_file.read_text()
    assert "s3cr3t" not in raw
    assert '"event":"script_executed"' in raw


async def test_reaper_removes_a_dead_owners_container_and_keeps_a_live_ones(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    dead_proc = subprocess.Popen(["sleep", "30"])
    dead_start = read_start_time(dead_proc.pid)
    assert dead_start is not None
    me = Owner.current()
    dead = Owner(
        instance_id="dead" + me.instance_id[4:],
        pid=dead_proc.pid,
        start_time=dead_start,
        boot_id=me.boot_id,
        host=me.host,
    )
    dead_proc.kill()
    dead_proc.wait()
    assert read_start_time(dead_proc.pid) is None
    # Any reaper on this engine removes the dead owner's container: a gateway that the other
    # test worker starts reaps at its start, and may get there between our create and our
    # reap. Whoever removed it, it must be gone and the live one kept; an attempt where
    # ours did not remove it is made again, a few times (the test fails if ours never does).
    for _ in range(REAP_ATTEMPTS):
        if await _reaped_here(docker_client, sandbox_image, dead, me):
            return
    pytest.fail(f"reap_orphans never removed the dead owner's container in {REAP_ATTEMPTS} tries")


REAP_ATTEMPTS = 5


async def _reaped_here(
    docker_client: docker.DockerClient, sandbox_image: str, dead: Owner, me: Owner
) -> bool:
    """One attempt: a container of `dead` and one of `me`, then reap_orphans; whether this
    call removed the dead one (the rest is asserted whichever reaper did)."""
    made = []
    try:
        for owner in (dead, me):
            made.append(
                docker_client.containers.create(
                    sandbox_image,
                    ["sleep", "60"],
                    labels=owner.labels(kind="test", agent="t", session="reaper"),
                )
            )
        backend = DockerBackend(Owner.current())
        try:
            removed = await reap_orphans(backend)
        finally:
            await backend.close()
        assert made[1].name not in removed
        remaining = {c.id for c in docker_client.containers.list(ignore_removed=True, all=True)}
        assert made[0].id not in remaining
        assert made[1].id in remaining
        return made[0].name in removed
    finally:
        for container in made:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def _corral(home: CorralHome, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [corral_bin(), *args], env=env_with_home(home), capture_output=True, text=True, timeout=120
    )


def test_corral_run_streams_output_and_exits_with_the_scripts_code(
    corral_home: CorralHome, tmp_path: Path
) -> None:
    script = tmp_path / "job.sh"
    script.write_text("echo building\necho warn >&2\nexit 7\n")
    done = _corral(corral_home, "run", str(script))
    assert done.returncode == 7
    assert done.stdout == "building\nwarn\n"
    assert "exit code 7" in done.stderr


def test_corral_run_exits_124_on_timeout_and_2_on_a_bad_timeout(
    corral_home: CorralHome, tmp_path: Path
) -> None:
    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    timed = _corral(corral_home, "run", str(script), "--timeout", "1")
    assert timed.returncode == 124
    assert timed.stdout == "started\n"
    bad = _corral(corral_home, "run", str(script), "--timeout", "301")
    assert bad.returncode == 2
    assert "timeout_seconds" in bad.stderr and "1 to 300" in bad.stderr


def test_corral_run_exits_125_when_the_sandbox_is_unavailable(
    corral_home: CorralHome, tmp_path: Path
) -> None:
    write_config(corral_home, '[container.sandbox]\nimage = "corral-test-missing:none"\n')
    script = tmp_path / "x.py"
    script.write_text(_marker_script(tmp_path / "marker"))
    done = _corral(corral_home, "run", str(script))
    assert done.returncode == 125
    assert "Script sandbox unavailable (image_missing)" in done.stderr
    assert not (tmp_path / "marker").exists()
    assert os.path.exists(corral_home.audit_file)
