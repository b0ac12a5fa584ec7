"""`[backend] kind = "kubernetes"` (old configs keep working), `corral doctor` against a
cluster that does not answer, and `corral images push`'s plan (issue 15)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from corral_cli.main import main
from orchestrator.backends.choose import backend_for
from orchestrator.backends.docker.image_push import config_snippet, push_plan
from orchestrator.backends.kubernetes.backend import resolve_kubeconfig
from orchestrator.backends.owner import Owner
from orchestrator.config import (
    DEFAULT_BROWSER_IMAGE,
    DEFAULT_SANDBOX_IMAGE,
    DockerBackendConfig,
    KubernetesBackendConfig,
    parse_config,
)
from orchestrator.errors import ConfigError

pytestmark = pytest.mark.kubernetes


@pytest.fixture(autouse=True)
def wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's rich consoles fix their width when COLUMNS is set at import: a long
    temporary path would wrap inside the doctor's table. 400 columns keep a row whole."""
    from corral_cli import main as cli

    for console in (cli.out, cli.err):
        monkeypatch.setattr(console, "_width", 400)


def corral(home: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={"CORRAL_HOME": str(home), **(env or {})})


def flat(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------ config


def test_a_config_without_backend_is_docker_as_before() -> None:
    config = parse_config({"container": {"backend": "docker", "docker_host": "unix:///x"}}, "t")
    assert config.effective_backend() == DockerBackendConfig(docker_host="unix:///x")
    assert config.cluster_images() == {}


def test_the_channels_can_all_be_kept_on_the_engines_attach() -> None:
    """`[backend] channel_socket = false` (default true) survives the engine `[container]`
    names, and reaches the Docker backend."""
    table = {"kind": "docker", "channel_socket": False}
    config = parse_config({"container": {"docker_host": "unix:///x"}, "backend": table}, "t")
    chosen = config.effective_backend()
    assert chosen == DockerBackendConfig(docker_host="unix:///x", channel_socket=False)
    backend = backend_for(config, Owner.current(), {})
    assert getattr(backend, "channel_socket", None) is False
    assert backend_for(parse_config({}, "t"), Owner.current(), {}).channel_socket


def test_kubernetes_backend_keys_parse_with_their_defaults() -> None:
    config = parse_config(
        {
            "backend": {
                "kind": "kubernetes",
                "namespace": "agents",
                "kubeconfig": "/etc/corral/kubeconfig",
                "context": "kind-corral",
                "sandbox_image": "localhost:5000/corral-sandbox:latest",
                "browser_image": "localhost:5000/corral-browser:latest",
                "image_pull_policy": "Always",
            }
        },
        "t",
    )
    backend = config.effective_backend()
    assert isinstance(backend, KubernetesBackendConfig)
    assert (backend.namespace, backend.context, backend.image_pull_policy) == (
        "agents",
        "kind-corral",
        "Always",
    )
    assert config.cluster_images() == {
        DEFAULT_SANDBOX_IMAGE: "localhost:5000/corral-sandbox:latest",
        DEFAULT_BROWSER_IMAGE: "localhost:5000/corral-browser:latest",
    }
    default = parse_config({"backend": {"kind": "kubernetes"}}, "t").effective_backend()
    assert isinstance(default, KubernetesBackendConfig)
    assert (default.namespace, default.kubeconfig, default.image_pull_policy) == (
        "corral",
        None,
        "IfNotPresent",
    )


@pytest.mark.parametrize(
    ("backend", "key"),
    [
        ({"kind": "kubernetes", "namespace": "Bad_NS"}, "backend.kubernetes.namespace"),
        ({"kind": "kubernetes", "image_pull_policy": "Sometimes"}, "image_pull_policy"),
        ({"kind": "kubernetes", "sandbox_image": "Not An Image"}, "sandbox_image"),
        ({"kind": "kubernetes", "namspace": "x"}, "namspace"),
        ({"kind": "nomad"}, "backend"),
        ({"kind": "kubernetes", "kiosk_seccomp_profile": "/etc/x.json"}, "kiosk_seccomp_profile"),
        ({"kind": "kubernetes", "kiosk_seccomp_profile": "../x.json"}, "kiosk_seccomp_profile"),
    ],
)
def test_a_bad_backend_key_is_named(backend: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"backend": backend}, "config.toml")
    assert key in str(caught.value)


def test_kubeconfig_is_the_configured_then_kubeconfig_env_then_home() -> None:
    assert resolve_kubeconfig("/a/b", {"KUBECONFIG": "/c"}) == "/a/b"
    assert resolve_kubeconfig(None, {"KUBECONFIG": "/c:/d", "HOME": "/h"}) == "/c"
    assert resolve_kubeconfig(None, {"HOME": "/h"}) == "/h/.kube/config"


# ------------------------------------------------------------------ doctor


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_doctor_fails_naming_the_kubeconfig_and_the_server_it_tried(tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[backend]\nkind = "kubernetes"\nkubeconfig = "{kubeconfig}"\ncontext = "ctx"\n'
    )
    result = corral(home, "doctor", env={"COLUMNS": "400"})
    text = flat(result.output)
    assert result.exit_code == 1, result.output
    assert str(kubeconfig) in text
    assert server in text
    assert "ctx" in text
    assert "does not answer" in text


def test_doctor_without_a_kubeconfig_file_says_where_it_looked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[backend]\nkind = "kubernetes"\n')
    result = corral(home, "doctor", env={"COLUMNS": "400", "KUBECONFIG": "", "HOME": str(tmp_path)})
    text = flat(result.output)
    assert result.exit_code == 1, result.output
    assert f"no kubeconfig file at {tmp_path}/.kube/config" in text
    assert "$KUBECONFIG" in text


# ------------------------------------------------------------------ images push


IMAGES = [
    "corral-sandbox:latest",
    "corral-kiosk:latest",
    "corral-proxy:latest",
    "corral-browser:latest",
    "corral-desktop:latest",
]


def test_push_plan_tags_each_cluster_image_under_the_registry() -> None:
    steps = push_plan("localhost:5000/", IMAGES)
    assert [(s.local, s.remote) for s in steps] == [
        ("corral-sandbox:latest", "localhost:5000/corral-sandbox:latest"),
        ("corral-kiosk:latest", "localhost:5000/corral-kiosk:latest"),
        ("corral-proxy:latest", "localhost:5000/corral-proxy:latest"),
        ("corral-browser:latest", "localhost:5000/corral-browser:latest"),
        ("corral-desktop:latest", "localhost:5000/corral-desktop:latest"),
    ]
    assert (steps[0].repository, steps[0].tag) == ("localhost:5000/corral-sandbox", "latest")
    snippet = config_snippet(steps)
    assert 'sandbox_image = "localhost:5000/corral-sandbox:latest"' in snippet
    config = parse_config(__import__("tomllib").loads(snippet), "snippet")
    assert config.cluster_images()[DEFAULT_SANDBOX_IMAGE] == steps[0].remote
    # The rigs run on Kubernetes too: their images are pushed and named in the snippet.
    assert config.cluster_images()[config.container.rigs.desktop_image] == steps[4].remote


def test_push_plan_replaces_a_registry_already_in_the_name_and_adds_latest() -> None:
    steps = push_plan(
        "registry.example.com/team",
        ["old.registry:5000/corral-sandbox:v2", "corral-kiosk", "p:1", "b", "d:2"],
    )
    assert [s.remote for s in steps] == [
        "registry.example.com/team/corral-sandbox:v2",
        "registry.example.com/team/corral-kiosk:latest",
        "registry.example.com/team/p:1",
        "registry.example.com/team/b:latest",
        "registry.example.com/team/d:2",
    ]


@pytest.mark.parametrize("registry", ["https://localhost:5000", "Registry", "host:port", ""])
def test_push_plan_refuses_what_is_not_a_registry(registry: str) -> None:
    with pytest.raises(ValueError, match="REGISTRY"):
        push_plan(registry, IMAGES)


def test_push_plan_takes_a_bare_host_with_a_port() -> None:
    assert push_plan("myregistry:5000", IMAGES)[0].remote == "myregistry:5000/corral-sandbox:latest"


# ------------------------------------------------------------------ docs/kubernetes.md

DOC = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"


def _blocks(language: str) -> list[str]:
    text = DOC.read_text()
    return [b.split("```", 1)[0] for b in text.split(f"```{language}\n")[1:]]


def test_the_docs_config_block_is_a_valid_config() -> None:
    import tomllib

    config = parse_config(tomllib.loads(_blocks("toml")[0]), "docs/kubernetes.md")
    assert isinstance(config.effective_backend(), KubernetesBackendConfig)


def test_the_docs_manifests_are_what_the_builders_make_and_valid() -> None:
    import kubernetes_validate
    import yaml

    shown = {}
    for block in _blocks("yaml"):
        doc = yaml.safe_load(block)
        if doc.get("kind") in ("Pod", "NetworkPolicy"):
            kubernetes_validate.validate(doc, "1.37", strict=True)
            shown[doc["metadata"]["name"]] = doc
    from sandboxes.k8s_manifests import DENY_ALL_POLICY, deny_all_policy

    assert shown[DENY_ALL_POLICY] == deny_all_policy("corral")
    from sandboxes.k8s_manifests import surface_policy

    policy_labels = {"corral.managed": "true", "corral.kind": "policy", "corral.session": "s1"}
    assert shown["corral-surface-s1-net"] == surface_policy(
        name="corral-surface-s1-net", namespace="corral", labels=policy_labels, session="s1"
    )
    pod = next(d for d in shown.values() if d["kind"] == "Pod")
    assert pod["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
