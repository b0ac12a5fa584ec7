"""`corral doctor` and `corral reap` with `[backend] kind = "kubernetes"`, against the fake."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from corral_cli.main import main
from tests.fake_kube.server import NAMESPACE, Served

pytestmark = pytest.mark.kubernetes


def test_doctor_passes_on_a_reachable_cluster_and_warns_about_the_pid_limit(
    cluster: Served, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[backend]\nkind = "kubernetes"\nnamespace = "{NAMESPACE}"\n'
        f'kubeconfig = "{cluster.kubeconfig}"\n'
    )
    result = CliRunner().invoke(main, ["doctor"], env={"CORRAL_HOME": str(home), "COLUMNS": "400"})
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert cluster.url in text and NAMESPACE in text
    assert "cannot verify the kubelet's podPidsLimit" in text
    assert "0 pod(s)/object(s) removed" in text


def test_corral_run_runs_the_file_in_a_pod_and_exits_with_its_code(
    cluster: Served, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[backend]\nkind = "kubernetes"\nnamespace = "{NAMESPACE}"\n'
        f'kubeconfig = "{cluster.kubeconfig}"\n'
    )
    script = tmp_path / "hello.py"
    script.write_text("print('from a pod')\nraise SystemExit(4)\n")
    before = len(cluster.api.requests)
    result = CliRunner().invoke(main, ["run", str(script)], env={"CORRAL_HOME": str(home)})
    assert result.exit_code == 4, result.output
    assert "from a pod" in result.output
    assert any(m == "POST" and p.endswith("/pods") for m, p in cluster.api.requests[before:])
    assert [k for k in cluster.api.store.objects if k[0] != "networkpolicies"] == []
