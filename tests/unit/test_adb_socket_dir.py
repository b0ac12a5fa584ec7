"""Where corral's adb server puts its unix socket (orchestrator/surfaces/android/adb.py):
a directory only this user can enter, under CORRAL_HOME when the path fits a socket."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from orchestrator.errors import DeviceError
from orchestrator.surfaces.android.adb import private_dir

pytestmark = [pytest.mark.unit, pytest.mark.mobile]


def test_the_wanted_directory_is_made_0700_and_kept(tmp_path: Path) -> None:
    wanted = Path("/tmp") / f"corral-u-{tmp_path.name[:20]}" / "adb"
    try:
        wanted.parent.mkdir(mode=0o755)
        wanted.mkdir(mode=0o755)  # an existing directory too loose: tightened
        folder, made = private_dir(wanted)
        assert folder == wanted and not made
        assert stat.S_IMODE(wanted.stat().st_mode) == 0o700
    finally:
        wanted.rmdir()
        wanted.parent.rmdir()


def test_a_path_too_long_for_a_socket_gets_a_fresh_private_directory(tmp_path: Path) -> None:
    folder, made = private_dir(tmp_path / ("x" * 120) / "adb")
    try:
        assert made and folder.name.startswith("corral-adb-")
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    finally:
        folder.rmdir()


def test_a_symlink_in_its_place_is_refused(tmp_path: Path) -> None:
    short = Path("/tmp") / f"corral-s-{tmp_path.name[:20]}"
    short.mkdir()
    try:
        (short / "adb").symlink_to(tmp_path)
        with pytest.raises(DeviceError, match="is not a directory of this user"):
            private_dir(short / "adb")
    finally:
        (short / "adb").unlink()
        short.rmdir()
