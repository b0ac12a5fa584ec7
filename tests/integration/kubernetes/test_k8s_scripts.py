"""execute_program on the Kubernetes backend, against the fake API server: the script
reaches its pod as a ConfigMap, its output comes back over the attach WebSocket with
Docker's caps and order, and every way a run ends deletes its pod and ConfigMap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.backends.kubernetes.backend import KubernetesBackend, KubeSettings
from orchestrator.backends.owner import Owner
from orchestrator.errors import EngineError, SandboxUnavailable, UnavailableCode
from sandboxes.script import ScriptContext, ScriptResult, ScriptSettings, execute_program
from sandboxes.script_policy import READ_CAP_BYTES, REPLY_CAP_BYTES, parse_params
from tests.fake_kube.server import FakeApi, Served
from tests.images import DEFAULT_SANDBOX_IMAGE
from tests.integration.kubernetes.conftest import leftovers

pytestmark = [pytest.mark.kubernetes, pytest.mark.anyio]


class Audit:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def record(self, event: str, agent: str | None, details: Any) -> None:
        self.events.append((event, dict(details)))


def context(
    backend: KubernetesBackend, tmp_path: Path, image: str = DEFAULT_SANDBOX_IMAGE
) -> ScriptContext:
    return ScriptContext(
        backend=backend,
        audit=Audit(),
        work_dir=tmp_path / "work",
        sandbox=ScriptSettings(image=image, tmp_size_mb=64),
    )


async def run(backend: KubernetesBackend, tmp_path: Path, code: str, **params: Any) -> ScriptResult:
    return await execute_program(parse_params({"code": code, **params}), context(backend, tmp_path))


async def test_output_comes_back_merged_in_order_with_the_exit_code(
    backend: KubernetesBackend, tmp_path: Path
) -> None:
    code = (
        "import sys\n"
        "for i in range(300):\n"
        "    stream = sys.stdout if i % 2 else sys.stderr\n"
        "    print(f'line {i}', file=stream, flush=True)\n"
        "sys.exit(7)\n"
    )
    result = await run(backend, tmp_path, code)
    assert result.output == "".join(f"line {i}\n" for i in range(300))
    assert result.exit_code == 7
    assert result.sandboxed and not result.timed_out


async def test_the_first_bytes_written_are_not_lost(
    backend: KubernetesBackend, tmp_path: Path
) -> None:
    result = await run(backend, tmp_path, "echo first", language="sh")
    assert result.output == "first\n"
    assert result.exit_code == 0


async def test_the_script_reaches_the_pod_as_a_configmap_not_a_host_path(
    backend: KubernetesBackend, cluster: Served, tmp_path: Path
) -> None:
    before = len(cluster.api.requests)
    # Relative paths: the working directory is /workspace (the fake kubelet maps mount
    # paths in argv, env and cwd, not inside the script's text).
    result = await run(backend, tmp_path, "cat main.sh; ls", language="sh")
    calls = cluster.api.requests[before:]
    assert result.output == "cat main.sh; lsmain.sh\n"  # the file has no newline at its end
    assert any(m == "POST" and p.endswith("/configmaps") for m, p in calls)
    assert any(m == "DELETE" and "/configmaps/" in p for m, p in calls)


async def test_output_past_the_caps_is_cut_as_on_docker(
    backend: KubernetesBackend, cluster: Served, tmp_path: Path
) -> None:
    code = "import sys\nsys.stdout.write('x' * (3 * 1024 * 1024))\n"
    before = len(cluster.api.requests)
    result = await run(backend, tmp_path, code)
    # All of it over the attach stream: its messages (a full pipe's 64 KiB and the channel
    # byte) are over httpx-ws's default limit, which broke the stream (close 1009).
    assert not any(p.endswith("/log") for _, p in cluster.api.requests[before:])
    assert result.truncated
    assert result.output_bytes == 3 * 1024 * 1024
    assert result.returned_bytes == REPLY_CAP_BYTES < READ_CAP_BYTES
    assert len(result.output) == REPLY_CAP_BYTES


@pytest.fixture
def broken_attach(cluster: Served) -> Iterator[FakeApi]:
    """Every attach stream of the fake breaks (close 1011) after its first 64 KiB."""
    cluster.api.break_attach_after = 64 * 1024
    try:
        yield cluster.api
    finally:
        cluster.api.break_attach_after = None
        cluster.api.refuse_logs = False


async def test_output_past_a_broken_attach_stream_comes_whole_from_the_log(
    backend: KubernetesBackend, broken_attach: FakeApi, tmp_path: Path
) -> None:
    lines = [f"line {i:05d} " + "y" * 60 for i in range(4000)]  # ~290 KiB, in order
    code = (
        "import sys\n"
        f"for i in range({len(lines)}):\n"
        "    stream = sys.stdout if i % 2 else sys.stderr\n"
        "    print(f'line {i:05d} ' + 'y' * 60, file=stream, flush=True)\n"
        "sys.exit(7)\n"
    )
    before = len(broken_attach.requests)
    result = await run(backend, tmp_path, code)
    assert any(p.endswith("/log") for _, p in broken_attach.requests[before:])
    assert result.output == "".join(f"{line}\n" for line in lines)  # none lost, none twice
    assert result.exit_code == 7


async def test_output_past_the_caps_and_a_broken_stream_is_cut_as_on_docker(
    backend: KubernetesBackend, broken_attach: FakeApi, tmp_path: Path
) -> None:
    code = "import sys\nsys.stdout.write('x' * (3 * 1024 * 1024))\n"
    result = await run(backend, tmp_path, code)
    assert result.truncated and result.output_bytes == 3 * 1024 * 1024
    assert result.output == "x" * REPLY_CAP_BYTES


async def test_a_broken_stream_whose_log_is_refused_is_an_error_not_a_short_answer(
    backend: KubernetesBackend, broken_attach: FakeApi, cluster: Served, tmp_path: Path
) -> None:
    broken_attach.refuse_logs = True
    code = "import sys\nsys.stdout.write('z' * (512 * 1024))\n"
    with pytest.raises(EngineError, match=r"broke \(closed with code 1011"):
        await run(backend, tmp_path, code)
    assert leftovers(cluster) == []


async def test_timeout_deletes_the_pod_and_keeps_partial_output(
    backend: KubernetesBackend, cluster: Served, tmp_path: Path
) -> None:
    code = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"
    result = await run(backend, tmp_path, code, timeout_seconds=1)
    assert result.timed_out and not result.hard_cap_hit
    assert result.exit_code is None
    assert result.output == "started\n"
    assert leftovers(cluster) == []


async def test_the_hard_cap_ends_a_run_the_timeout_does_not(
    backend: KubernetesBackend, tmp_path: Path
) -> None:
    params = parse_params({"code": "sleep 60", "language": "sh", "timeout_seconds": 30})
    result = await execute_program(params, context(backend, tmp_path), hard_cap_seconds=1)
    assert result.hard_cap_hit and result.timed_out


async def test_cancel_deletes_the_pod(
    backend: KubernetesBackend, cluster: Served, tmp_path: Path
) -> None:
    started = anyio.Event()
    params = parse_params({"code": "echo up; sleep 60", "language": "sh"})
    async with anyio.create_task_group() as tasks:

        async def call() -> None:
            await execute_program(
                params, context(backend, tmp_path), on_output=lambda _: started.set()
            )

        tasks.start_soon(call)
        with anyio.fail_after(10):
            await started.wait()
        assert [k for k in leftovers(cluster) if k.startswith("pods/")] != []
        tasks.cancel_scope.cancel()
    assert leftovers(cluster) == []


async def test_an_image_the_cluster_lacks_refuses_the_run_and_leaves_nothing(
    backend: KubernetesBackend, cluster: Served, tmp_path: Path
) -> None:
    ctx = context(backend, tmp_path, image="corral-not-pushed:latest")
    with pytest.raises(SandboxUnavailable) as caught:
        await execute_program(parse_params({"code": "print(1)"}), ctx)
    assert caught.value.code is UnavailableCode.IMAGE_MISSING
    assert "corral-not-pushed:latest" in caught.value.reason
    assert "corral images push" in caught.value.fix
    assert leftovers(cluster) == []
    assert isinstance(ctx.audit, Audit)
    # The cluster learns it at the pod's start: the attempt is on record, then why not.
    assert [e for e, _ in ctx.audit.events] == ["script_started", "script_sandbox_unavailable"]


async def test_a_namespace_that_does_not_exist_is_named(cluster: Served) -> None:
    settings = KubeSettings(kubeconfig=str(cluster.kubeconfig), namespace="nope")
    kube = KubernetesBackend(Owner.current(), settings)
    try:
        with pytest.raises(SandboxUnavailable) as caught:
            await kube.check(DEFAULT_SANDBOX_IMAGE)
    finally:
        await kube.close()
    assert caught.value.code is UnavailableCode.INVALID_CONFIG
    assert "nope" in caught.value.reason and "kubectl create namespace nope" in caught.value.fix


async def test_the_deny_all_policy_is_in_place_before_any_script_runs(
    backend: KubernetesBackend, cluster: Served, tmp_path: Path
) -> None:
    await run(backend, tmp_path, "true", language="sh")
    [policy] = cluster.api.store.list(
        "networkpolicies", "corral-test", "corral.policy=deny-all", ""
    )
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["egress"] == [] and policy["spec"]["ingress"] == []


async def test_a_server_that_speaks_only_v4_runs_scripts_the_same(
    backend: KubernetesBackend, cluster: Served, tmp_path: Path
) -> None:
    cluster.api.protocols = ("v4.channel.k8s.io",)  # no channel-close message in v4
    try:
        result = await run(backend, tmp_path, "echo one; echo two >&2; exit 5", language="sh")
    finally:
        cluster.api.protocols = ("v5.channel.k8s.io", "v4.channel.k8s.io")
    assert (result.output, result.exit_code) == ("one\ntwo\n", 5)
