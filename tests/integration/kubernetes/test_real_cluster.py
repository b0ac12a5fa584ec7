"""The Kubernetes backend against a real cluster (issue 15): skipped unless
CORRAL_TEST_KUBECONFIG names a kubeconfig (docs/kubernetes.md: with kind).

CORRAL_TEST_NAMESPACE (default corral-test) must exist; CORRAL_TEST_K8S_IMAGE (default
corral-sandbox:latest) must be pullable by the nodes (`kind load docker-image` or
`corral images push`). The cluster's network plugin must enforce NetworkPolicy.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.backends.kubernetes.backend import KubernetesBackend, KubeSettings
from orchestrator.backends.owner import Owner
from sandboxes.script import ScriptContext, ScriptResult, ScriptSettings, execute_program
from sandboxes.script_policy import parse_params
from tests.images import DEFAULT_SANDBOX_IMAGE

KUBECONFIG = os.environ.get("CORRAL_TEST_KUBECONFIG", "")
NAMESPACE = os.environ.get("CORRAL_TEST_NAMESPACE", "corral-test")
IMAGE = os.environ.get("CORRAL_TEST_K8S_IMAGE", DEFAULT_SANDBOX_IMAGE)

pytestmark = [
    pytest.mark.kubernetes,
    pytest.mark.anyio,
    pytest.mark.skipif(
        not KUBECONFIG,
        reason="no real cluster: set CORRAL_TEST_KUBECONFIG to a kubeconfig "
        "(docs/kubernetes.md shows how with kind)",
    ),
]


class Audit:
    def record(self, event: str, agent: str | None, details: Any) -> None:
        pass


@pytest.fixture
async def real() -> AsyncIterator[KubernetesBackend]:
    settings = KubeSettings(kubeconfig=KUBECONFIG, namespace=NAMESPACE, pull_policy="IfNotPresent")
    backend = KubernetesBackend(Owner.current(), settings)
    yield backend
    left = await backend.list_managed({"corral.instance": backend.owner.instance_id})
    await backend.close()
    assert left == []


async def run(backend: KubernetesBackend, tmp_path: Path, code: str, **params: Any) -> ScriptResult:
    ctx = ScriptContext(
        backend=backend,
        audit=Audit(),
        work_dir=tmp_path,
        sandbox=ScriptSettings(image=IMAGE, tmp_size_mb=64),
    )
    return await execute_program(parse_params({"code": code, **params}), ctx)


async def test_a_script_runs_in_a_pod_with_its_output_and_exit_code(
    real: KubernetesBackend, tmp_path: Path
) -> None:
    result = await run(real, tmp_path, "import sys\nprint('hi')\nsys.exit(3)")
    assert (result.output, result.exit_code) == ("hi\n", 3)


async def test_the_pod_is_locked_down_as_s1_2_says(real: KubernetesBackend, tmp_path: Path) -> None:
    code = (
        "id -u; id -g\n"
        "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status\n"
        "touch /x 2>/dev/null && echo root-writable || echo root-read-only\n"
        "touch /workspace/x 2>/dev/null && echo ws-writable || echo ws-read-only\n"
        "touch /tmp/x && echo tmp-writable\n"
        "ls /var/run/secrets/kubernetes.io 2>/dev/null && echo token || echo no-token\n"
        "cat /sys/fs/cgroup/memory.max 2>/dev/null"
        " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes\n"
    )
    result = await run(real, tmp_path, code, language="sh")
    lines = result.output.split("\n")
    assert lines[0:2] == ["1000", "1000"]
    assert "CapEff:\t0000000000000000" in lines
    assert "NoNewPrivs:\t1" in lines
    for expected in ("root-read-only", "ws-read-only", "tmp-writable", "no-token"):
        assert expected in lines
    assert str(2 * 1024**3) in lines


async def test_the_deny_all_policy_keeps_the_pod_off_the_network(
    real: KubernetesBackend, tmp_path: Path
) -> None:
    # The cluster's own API service: the one address this test may try (it is the
    # cluster under test), refused by the policy before any byte is sent.
    code = (
        "import os, socket\n"
        "try:\n"
        "    socket.create_connection((os.environ['KUBERNETES_SERVICE_HOST'], 443), timeout=5)\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print('blocked', type(exc).__name__)\n"
    )
    result = await run(real, tmp_path, code)
    assert result.output.startswith("blocked"), result.output


async def test_cancel_deletes_the_pod(real: KubernetesBackend, tmp_path: Path) -> None:
    started = anyio.Event()
    ctx = ScriptContext(
        backend=real,
        audit=Audit(),
        work_dir=tmp_path,
        sandbox=ScriptSettings(image=IMAGE, tmp_size_mb=64),
    )
    params = parse_params({"code": "echo up; sleep 60", "language": "sh"})
    async with anyio.create_task_group() as tasks:

        async def call() -> None:
            await execute_program(params, ctx, on_output=lambda _: started.set())

        tasks.start_soon(call)
        with anyio.fail_after(120):
            await started.wait()
        tasks.cancel_scope.cancel()
    assert await real.list_managed({"corral.instance": real.owner.instance_id}) == []
