"""The browser rig's start (rig_images/browser/cdp_pipe.py): Chromium's "No usable sandbox"
is seen even when its stderr line comes after the CDP pipe has closed; it was read only
from what the stderr thread had taken by then, and a late line made the rig fail to start
with an empty reason instead of starting again without the sandbox (seen once in a
`make test` run, on the Kubernetes fake's node). Below the integration tests' real
Chromium starts; here a stand-in Chromium orders its output on purpose."""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

# Reads the probe from its CDP input (fd 3), closes both CDP pipes and exits; a child it
# leaves behind writes the sandbox line to the shared stderr only once it has gone.
LATE_LINE = """#!/bin/sh
head -c 1 <&3 >/dev/null
parent=$$
( exec 3<&- 4>&-
  while kill -0 "$parent" 2>/dev/null; do :; done
  echo "[1:1:FATAL:zygote_host_impl_linux.cc(127)] No usable sandbox! Update your kernel" >&2
) &
exit 0
"""


def cdp_pipe() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "cdp_pipe_under_test", REPO / "rig_images" / "browser" / "cdp_pipe.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_sandbox_line_after_the_pipe_closed_is_still_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = cdp_pipe()
    fake = tmp_path / "chromium"
    fake.write_text(LATE_LINE)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(module, "CHROMIUM", str(fake))
    monkeypatch.setattr(module, "HOME", str(tmp_path))
    browser = module.Browser({}, sandbox=True)
    try:
        with pytest.raises(RuntimeError) as failed:
            browser.probe(deadline=float("inf"))
    finally:
        os.close(browser.to_chrome)
        os.close(browser.from_chrome)
        browser.proc.stderr.close()
    assert "No usable sandbox" in str(failed.value)
    assert "exit status 0" in str(failed.value)
