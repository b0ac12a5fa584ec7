"""`corral doctor`'s checks for `[backend] kind = "kubernetes"`.

The pid limit (SPEC S1.2: 256 processes) is the kubelet's `podPidsLimit`, not a pod
field; the API lets corral read a node's kubelet configuration only with the
`nodes/proxy` permission, which corral does not ask for. So the check warns that it
could not verify it, and says where to set it (docs/kubernetes.md).
"""

from __future__ import annotations

from orchestrator.backends.kubernetes.backend import KubernetesBackend
from orchestrator.backends.reaper import reap_orphans
from orchestrator.errors import CorralError, SandboxUnavailable
from sandboxes.ports import AuditSink

PID_LIMIT_NOTE = (
    "warning: cannot verify the kubelet's podPidsLimit (S1.2 wants 256); set "
    "`podPidsLimit: 256` in each node's KubeletConfiguration (docs/kubernetes.md)"
)


async def kubernetes_rows(
    backend: KubernetesBackend, image: str, audit: AuditSink | None = None
) -> list[tuple[str, bool, str]]:
    """(check, ok, detail) rows; an unreachable cluster fails naming what was tried."""
    settings = backend.settings
    try:
        await backend.check(image)
    except SandboxUnavailable as exc:
        return [(f"kubernetes ({exc.code.value})", False, f"{exc.reason}. Fix: {exc.fix}")]
    except CorralError as exc:
        return [("kubernetes", False, f"{backend.target.describe()}: {exc}")]
    rows = [
        (
            "kubernetes cluster",
            True,
            f"{backend.target.server} namespace {settings.namespace} "
            f"(kubeconfig {settings.kubeconfig})",
        ),
        ("sandbox image", True, f"{backend.cluster_image(image)} (pulled by the nodes)"),
        ("pid limit", True, PID_LIMIT_NOTE),
    ]
    reaped = await reap_orphans(backend, audit)
    rows.append(("orphans", True, f"{len(reaped)} pod(s)/object(s) removed"))
    return rows
