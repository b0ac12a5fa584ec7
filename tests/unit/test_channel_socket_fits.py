"""Where a container's channel goes on a socket of its own (pure rule and spec change,
`orchestrator.backends.docker.channel_socket`); the socket itself, attacked, is in
tests/integration/test_channel_socket.py."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.backends.docker.channel_socket import (
    TARGET,
    VARIABLE,
    ChannelFolder,
    ChannelListener,
    describe,
    fits,
)
from sandboxes.isolation import kiosk_spec, locked_down
from sandboxes.ports import BindMount, ContainerSpec

LOCAL = "unix:///var/run/docker.sock"


def kiosk() -> ContainerSpec:
    return kiosk_spec(image="corral-kiosk:latest", labels={}, network=None, seccomp=None)


def test_a_kiosk_on_this_machines_engine_with_runc_gets_its_socket() -> None:
    assert fits(kiosk(), LOCAL)
    assert fits(dataclasses.replace(kiosk(), runtime="runc"), "http+unix:///run/docker.sock")


@pytest.mark.parametrize(
    "url", ["tcp://10.0.0.5:2376", "ssh://builder@host", "npipe:////./pipe/docker_engine"]
)
def test_an_engine_elsewhere_keeps_the_attach(url: str) -> None:
    assert not fits(kiosk(), url)  # its bind mounts would be another machine's files


def test_gvisor_and_specs_that_do_not_ask_keep_the_attach() -> None:
    assert not fits(dataclasses.replace(kiosk(), runtime="runsc"), LOCAL)
    assert not fits(kiosk(), LOCAL, default_runtime="runsc")  # the engine's default
    assert fits(dataclasses.replace(kiosk(), runtime="runc"), LOCAL, default_runtime="runsc")
    assert not fits(locked_down(image="corral-sandbox:latest", labels={}), LOCAL)


def test_the_listener_mounts_one_read_only_socket_and_names_it() -> None:
    folder = ChannelFolder()
    path = folder.socket_path()
    listener = ChannelListener(path)
    try:
        assert path.parent.stat().st_mode & 0o777 == 0o700 and path.is_socket()
        spec = listener.spec_for(dataclasses.replace(kiosk(), mounts=(BindMount("/a", "/b"),)))
        assert spec.mounts == (BindMount("/a", "/b"), BindMount(str(path), TARGET, True))
        assert spec.environment[VARIABLE] == TARGET and spec.environment["HOME"]
    finally:
        listener.close()
    assert not path.exists()
    folder.remove()
    assert not path.parent.exists()


def test_a_folder_left_by_a_dead_process_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    child = subprocess.Popen(["true"])
    child.wait()  # a pid that has ended (reaped: /proc has no entry for it)
    gone = tmp_path / f"corral-ch-{child.pid}-abcd"
    live = tmp_path / f"corral-ch-{os.getpid()}-efgh"
    other = tmp_path / "corral-chores"
    for folder in (gone, live, other):
        folder.mkdir()
    (gone / "left.sock").write_text("")
    kept = tmp_path / "kept"
    kept.mkdir()
    (tmp_path / f"corral-ch-{child.pid}-link").symlink_to(kept)  # another's trap: not followed
    folder = ChannelFolder(tmp_path)
    made = folder.socket_path().parent
    assert not gone.exists() and live.exists() and other.exists() and kept.exists()
    assert made.name.startswith(f"corral-ch-{os.getpid()}-")
    folder.remove()
    assert not made.exists()


def test_doctor_says_where_the_channels_go_and_why() -> None:
    assert "a unix socket of their own" in describe(True, LOCAL, "runc")
    assert "channel_socket = false" in describe(False, LOCAL, "runc")
    assert "not this machine's" in describe(True, "tcp://10.0.0.5:2376", "runc")
    assert "default runtime is runsc" in describe(True, LOCAL, "runsc")
