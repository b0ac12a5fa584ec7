"""The script sandbox's container (SPEC S1.2) and its mapping onto the docker SDK."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from docker.models.containers import _create_container_args

from orchestrator.backends.docker.sdk import API_VERSION
from orchestrator.backends.docker.spec import LOOPBACK_HOSTS, create_kwargs
from orchestrator.config import DEFAULT_SANDBOX_IMAGE
from sandboxes.exit_line import ExitLine
from sandboxes.isolation import kiosk_spec, locked_down
from sandboxes.ports import BindMount, ContainerSpec
from sandboxes.script_policy import HARD_CAP_SECONDS, build_script_spec, sandbox_user

MARK = "corral-exit-0123456789abcdef"

pytestmark = pytest.mark.unit

GIB = 1024**3
LABELS = {"corral.managed": "true", "corral.kind": "script"}


def spec_for(
    language: str = "python",
    *,
    workspace: str = "/srv/corral/work/exec-abc",
    tmp_size_mb: int = 64,
    **extra: int,
) -> ContainerSpec:
    return build_script_spec(
        image=DEFAULT_SANDBOX_IMAGE,
        language=language,
        workspace_dir=workspace,
        user="1000:1000",
        labels=LABELS,
        tmp_size_mb=tmp_size_mb,
        **({"exit_mark": MARK} if language is not None else {}),
        **extra,
    )


# ------------------------------------------------------------------ sandbox_user


def test_a_root_host_runs_the_script_as_1000_1000() -> None:
    assert sandbox_user(0, 0, is_wsl=False) == "1000:1000"


def test_a_non_root_host_user_runs_the_script_as_itself() -> None:
    assert sandbox_user(1001, 1002, is_wsl=False) == "1001:1002"


@pytest.mark.parametrize(("uid", "gid"), [(0, 0), (1001, 1002), (1000, 1000)])
def test_wsl_always_runs_the_script_as_1000_1000(uid: int, gid: int) -> None:
    assert sandbox_user(uid, gid, is_wsl=True) == "1000:1000"


# ------------------------------------------------------------------ build_script_spec


def test_the_script_container_has_no_network() -> None:
    assert spec_for().network is None
    kwargs = create_kwargs(spec_for())
    assert kwargs["network_mode"] == "none"
    assert kwargs["network_disabled"] is True  # the engine's network stack is skipped
    assert "network" not in kwargs


def test_a_container_with_no_network_gets_corrals_hosts_file_read_only() -> None:
    kwargs = create_kwargs(spec_for(workspace="/w/exec-1"))

    assert kwargs["volumes"][str(LOOPBACK_HOSTS)] == {"bind": "/etc/hosts", "mode": "ro"}
    names = LOOPBACK_HOSTS.read_text().split()
    assert names == ["127.0.0.1", "localhost", "::1", "localhost", "ip6-localhost", "ip6-loopback"]


def test_a_container_on_a_network_joins_it_and_keeps_the_engines_hosts_file() -> None:
    kwargs = create_kwargs(kiosk_spec(image="x", labels={}, network="corral-s1", seccomp=None))

    assert kwargs["network"] == "corral-s1"
    assert "network_mode" not in kwargs and "network_disabled" not in kwargs
    assert "volumes" not in kwargs


def test_the_script_container_root_filesystem_is_read_only() -> None:
    assert spec_for().read_only is True


def test_the_script_container_has_2_gib_of_memory_and_no_swap() -> None:
    spec = spec_for()

    assert spec.memory_bytes == 2 * GIB
    assert spec.memory_swap_bytes == spec.memory_bytes


def test_the_script_container_is_limited_to_256_processes_and_one_cpu() -> None:
    spec = spec_for()

    assert spec.pids_limit == 256
    assert spec.nano_cpus == 1_000_000_000


def test_the_script_container_drops_every_capability_and_new_privileges() -> None:
    spec = spec_for()

    assert spec.cap_drop == ("ALL",)
    assert "no-new-privileges" in spec.security_opt


@pytest.mark.parametrize("size", [8, 64, 1024])
def test_tmp_is_a_tmpfs_of_the_configured_size(size: int) -> None:
    spec = spec_for(tmp_size_mb=size)

    assert list(spec.tmpfs) == ["/tmp"]
    assert f"size={size}m" in spec.tmpfs["/tmp"].split(",")


def test_exactly_one_directory_is_mounted_read_only_at_workspace() -> None:
    spec = spec_for(workspace="/srv/corral/work/exec-xyz")

    assert spec.mounts == (
        BindMount(source="/srv/corral/work/exec-xyz", target="/workspace", read_only=True),
    )
    assert spec.working_dir == "/workspace"


def test_no_docker_socket_reaches_the_script_container() -> None:
    spec = spec_for()

    everything = [*spec.environment.values(), *spec.tmpfs, *(m.source for m in spec.mounts)]
    assert not any("docker.sock" in value for value in everything)
    assert "DOCKER_HOST" not in spec.environment


def test_pid_1_is_the_hard_cap_and_tini_from_the_image_reaps_under_it() -> None:
    """The script cannot stop PID 1, so the cap is PID 1; tini -s (a child subreaper) reaps
    zombies; Docker's own --init would bind-mount a host binary (S1.2)."""
    spec = spec_for()

    assert spec.command is not None
    assert spec.command[:3] == ("timeout", "--signal=KILL", "600")
    assert spec.command[3:6] == ("tini", "-s", "--")
    assert create_kwargs(spec)["init"] is False


def test_labels_user_and_image_are_passed_through() -> None:
    spec = spec_for()

    assert dict(spec.labels) == LABELS
    assert spec.user == "1000:1000"
    assert spec.image == DEFAULT_SANDBOX_IMAGE


def hard_cap_part(command: tuple[str, ...]) -> tuple[str, ...]:
    start = command.index("timeout")
    return command[start : start + 3]


def test_the_command_enforces_the_600_second_hard_cap_with_sigkill() -> None:
    command = spec_for().command

    assert HARD_CAP_SECONDS == 600
    assert hard_cap_part(command) == ("timeout", "--signal=KILL", "600")
    assert command.index("timeout") < command.index("python3")  # the cap wraps the script


def test_the_hard_cap_in_the_command_follows_the_argument() -> None:
    assert hard_cap_part(spec_for(hard_cap_seconds=7).command) == ("timeout", "--signal=KILL", "7")


@pytest.mark.parametrize(
    ("language", "tail"),
    [
        ("python", ("python3", "-u", "/workspace/main.py")),
        ("bash", ("bash", "/workspace/main.sh")),
        ("sh", ("sh", "/workspace/main.sh")),
    ],
)
def test_the_command_runs_the_interpreter_on_the_script_with_stderr_merged(
    language: str, tail: tuple[str, ...]
) -> None:
    command = spec_for(language).command

    assert command[-len(tail) :] == tail
    shell = command[command.index("-c") + 1]
    assert "2>&1" in shell


def _run_on_host(tmp_path: Path, body: str) -> subprocess.CompletedProcess[bytes]:
    """Run the container's argv on the host with the script path swapped in (no Docker)."""
    assert shutil.which("timeout") is not None
    script = tmp_path / "main.sh"
    script.write_text(body)
    full = spec_for("sh").command
    assert full is not None
    # tini is in the image only: run the rest of the argv without it.
    command = [*full[:3], *full[full.index("sh") : -1], str(script)]
    return subprocess.run(command, capture_output=True, timeout=10, check=False)


def test_the_command_merges_stderr_into_stdout_in_the_order_written(tmp_path: Path) -> None:
    done = _run_on_host(tmp_path, "echo one\necho two >&2\necho three\necho four >&2\n")

    assert done.returncode == 0
    line = ExitLine(MARK)
    output = line.feed(done.stdout) + line.rest()
    assert output == b"one\ntwo\nthree\nfour\n"
    assert line.said is not None and line.said.code == 0
    assert done.stderr == b""


@pytest.mark.parametrize(("body", "code"), [("exit 3", 3), ("printf partial; exit 0", 0)])
def test_the_exit_line_comes_last_with_the_scripts_status_which_the_command_exits_with(
    tmp_path: Path, body: str, code: int
) -> None:
    done = _run_on_host(tmp_path, body + "\n")

    assert done.returncode == code
    assert done.stdout.startswith(b"partial" if code == 0 else MARK.encode())
    head, _, status = done.stdout.partition(MARK.encode())
    assert head == (b"partial" if code == 0 else b"")
    assert status.startswith(f"{code}:".encode()) and status.endswith(b"\n")


# ------------------------------------------------------------------ create_kwargs


def test_create_kwargs_maps_every_isolation_field() -> None:
    spec = spec_for(workspace="/w/exec-1", tmp_size_mb=32)

    kwargs = create_kwargs(spec)

    assert kwargs["image"] == DEFAULT_SANDBOX_IMAGE
    assert kwargs["command"] == list(spec.command)
    assert kwargs["labels"] == LABELS
    assert kwargs["user"] == "1000:1000"
    assert kwargs["network_mode"] == "none"
    assert kwargs["read_only"] is True
    assert kwargs["mem_limit"] == 2 * GIB
    assert kwargs["memswap_limit"] == 2 * GIB
    assert kwargs["pids_limit"] == 256
    assert kwargs["nano_cpus"] == 1_000_000_000
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["tmpfs"] == {"/tmp": spec.tmpfs["/tmp"]}
    assert kwargs["volumes"] == {
        "/w/exec-1": {"bind": "/workspace", "mode": "ro"},
        str(LOOPBACK_HOSTS): {"bind": "/etc/hosts", "mode": "ro"},
    }
    assert kwargs["environment"] == dict(spec.environment)
    assert kwargs["working_dir"] == "/workspace"
    assert kwargs["init"] is False


def test_create_kwargs_turns_off_logging_tty_and_stdin() -> None:
    kwargs = create_kwargs(spec_for())

    assert kwargs["log_config"] == {"type": "none", "config": {}}
    assert kwargs["tty"] is False
    assert kwargs["stdin_open"] is False
    assert kwargs["detach"] is True


def test_no_container_ever_gets_dockers_init_which_mounts_a_host_binary() -> None:
    kiosk = kiosk_spec(image="x", labels={}, network=None, seccomp=None)

    assert create_kwargs(kiosk)["init"] is False
    assert create_kwargs(spec_for())["init"] is False


def test_a_writable_mount_is_mapped_to_mode_rw() -> None:
    spec = locked_down(
        image="x",
        command=("true",),
        labels={},
        mounts=(BindMount("/a", "/in"), BindMount("/b", "/out", read_only=False)),
    )

    assert create_kwargs(spec)["volumes"] == {
        "/a": {"bind": "/in", "mode": "ro"},
        "/b": {"bind": "/out", "mode": "rw"},
        str(LOOPBACK_HOSTS): {"bind": "/etc/hosts", "mode": "ro"},
    }


def test_the_docker_sdk_turns_the_kwargs_into_the_locked_down_engine_config() -> None:
    """The SDK's own (pure) translation: every kwarg is one it knows, nothing is dropped."""
    kwargs = {**create_kwargs(spec_for(workspace="/w/exec-2")), "version": API_VERSION}

    create = _create_container_args(kwargs)

    host = create["host_config"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == host["MemorySwap"] == 2 * GIB
    assert host["PidsLimit"] == 256
    assert host["NanoCpus"] == 1_000_000_000
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Binds"] == ["/w/exec-2:/workspace:ro", f"{LOOPBACK_HOSTS}:/etc/hosts:ro"]
    assert create["network_disabled"] is True
    assert list(host["Tmpfs"]) == ["/tmp"]
    assert host["Init"] is False  # no docker-init bind-mounted from the host
    assert host["LogConfig"]["Type"] == "none"
    assert "Privileged" not in host or host["Privileged"] is False
    assert create["tty"] is False
    assert create["user"] == "1000:1000"
