"""Why the sandbox is unavailable (SPEC S1.6): a closed set of codes, each with its fix.

These fakes sit below the real integration tests of the same paths.
"""

from __future__ import annotations

import errno
from pathlib import Path

import docker.errors
import pytest
import requests.exceptions

from orchestrator.backends.docker import sdk as docker_backend
from orchestrator.backends.docker.sdk import (
    DEFAULT_SOCKET,
    classify_connection_error,
    engine_url,
    map_docker_errors,
)
from orchestrator.config import DEFAULT_SANDBOX_IMAGE
from orchestrator.errors import (
    EngineConflict,
    EngineError,
    EngineNotFound,
    NoSessionNetwork,
    SandboxUnavailable,
    UnavailableCode,
)

pytestmark = pytest.mark.unit


def caused_by(outer: BaseException, inner: BaseException) -> BaseException:
    """`outer` raised while handling `inner`, as `raise outer from inner` would leave it."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as exc:
        return exc


@pytest.fixture
def no_dockerd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker_backend.shutil, "which", lambda name: None)


@pytest.fixture
def dockerd_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        docker_backend.shutil,
        "which",
        lambda name: "/usr/sbin/dockerd" if name == "dockerd" else None,
    )


# ------------------------------------------------------------------ engine_url


def test_engine_url_prefers_the_configured_docker_host() -> None:
    url = engine_url("tcp://10.0.0.1:2375", {"DOCKER_HOST": "unix:///other.sock"})

    assert url == "tcp://10.0.0.1:2375"


def test_engine_url_falls_back_to_the_docker_host_variable() -> None:
    assert engine_url(None, {"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}) == (
        "unix:///run/user/1000/docker.sock"
    )


@pytest.mark.parametrize("environ", [{}, {"DOCKER_HOST": ""}])
def test_engine_url_defaults_to_the_local_socket(environ: dict[str, str]) -> None:
    assert engine_url(None, environ) == DEFAULT_SOCKET == "unix:///var/run/docker.sock"


# ------------------------------------------------------------------ classify_connection_error


def test_a_permission_error_in_the_cause_chain_means_permission_denied(
    tmp_path: Path, dockerd_installed: None
) -> None:
    exc = caused_by(
        requests.exceptions.ConnectionError("Connection aborted."),
        PermissionError(errno.EACCES, "Permission denied"),
    )

    found = classify_connection_error(exc, f"unix://{tmp_path}/docker.sock")

    assert found.code is UnavailableCode.PERMISSION_DENIED
    assert "docker" in found.fix


def test_permission_denied_in_the_message_alone_means_permission_denied(
    no_dockerd: None,
) -> None:
    exc = docker.errors.DockerException(
        "Error while fetching server API version: ('Connection aborted.', "
        "PermissionError(13, 'Permission denied'))"
    )

    found = classify_connection_error(exc, DEFAULT_SOCKET)

    assert found.code is UnavailableCode.PERMISSION_DENIED


def test_an_eperm_wrapped_as_the_first_argument_of_a_cause_means_permission_denied(
    dockerd_installed: None,
) -> None:
    """requests wraps an OSError as ConnectionError(err); docker-py re-raises that as a
    DockerException. EPERM's text is "Operation not permitted", so only the chain finds it."""
    inner = requests.exceptions.ConnectionError(
        PermissionError(errno.EPERM, "Operation not permitted")
    )
    exc = caused_by(docker.errors.DockerException("Error while fetching server API version"), inner)

    found = classify_connection_error(exc, DEFAULT_SOCKET)

    assert found.code is UnavailableCode.PERMISSION_DENIED


def test_a_missing_socket_without_dockerd_means_docker_is_not_installed(
    tmp_path: Path, no_dockerd: None
) -> None:
    url = f"unix://{tmp_path}/docker.sock"
    exc = requests.exceptions.ConnectionError(FileNotFoundError(errno.ENOENT, "No such file"))

    found = classify_connection_error(exc, url)

    assert found.code is UnavailableCode.DOCKER_NOT_INSTALLED
    assert "install Docker" in found.fix


def test_a_missing_socket_with_dockerd_installed_means_the_daemon_is_unreachable(
    tmp_path: Path, dockerd_installed: None
) -> None:
    url = f"unix://{tmp_path}/docker.sock"
    exc = requests.exceptions.ConnectionError(FileNotFoundError(errno.ENOENT, "No such file"))

    found = classify_connection_error(exc, url)

    assert found.code is UnavailableCode.DAEMON_UNREACHABLE
    assert url in found.reason
    assert "start the Docker engine" in found.fix


def test_a_socket_that_exists_but_does_not_answer_means_the_daemon_is_unreachable(
    tmp_path: Path, no_dockerd: None
) -> None:
    socket_path = tmp_path / "docker.sock"
    socket_path.touch()

    found = classify_connection_error(ConnectionRefusedError(), f"unix://{socket_path}")

    assert found.code is UnavailableCode.DAEMON_UNREACHABLE


def test_a_remote_engine_that_does_not_answer_is_unreachable_not_uninstalled(
    no_dockerd: None,
) -> None:
    found = classify_connection_error(ConnectionRefusedError(), "tcp://10.0.0.9:2375")

    assert found.code is UnavailableCode.DAEMON_UNREACHABLE


@pytest.mark.parametrize("code", list(UnavailableCode))
def test_the_unavailable_message_starts_with_the_code_and_ends_with_the_fix(
    code: UnavailableCode,
) -> None:
    error = SandboxUnavailable(code, "the reason", "corral images build")

    assert str(error).startswith(f"Script sandbox unavailable ({code.value}): the reason")
    assert str(error).endswith("Fix: corral images build")


def test_the_unavailable_codes_are_the_closed_set_in_the_spec() -> None:
    assert {code.value for code in UnavailableCode} == {
        "docker_not_installed",
        "daemon_unreachable",
        "permission_denied",
        "image_missing",
        "invalid_config",
        "engine_error",
    }


# ------------------------------------------------------------------ map_docker_errors


def test_a_missing_image_is_image_missing_naming_the_image_and_the_build_command() -> None:
    with (
        pytest.raises(SandboxUnavailable) as info,
        map_docker_errors(DEFAULT_SOCKET, DEFAULT_SANDBOX_IMAGE),
    ):
        raise docker.errors.ImageNotFound("No such image: corral-sandbox:latest")

    assert info.value.code is UnavailableCode.IMAGE_MISSING
    assert DEFAULT_SANDBOX_IMAGE in info.value.reason
    assert info.value.fix == "corral images build"
    assert str(info.value).startswith("Script sandbox unavailable (image_missing): ")


def test_any_other_engine_api_error_is_an_engine_error() -> None:
    with pytest.raises(EngineError, match="conflict"), map_docker_errors(DEFAULT_SOCKET):
        raise docker.errors.APIError("409", explanation="conflict")


class _Answer:
    """What the SDK's errors read the status code from."""

    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.reason = "refused"
        self.url = "http+docker://localhost/x"


def test_a_missing_object_is_engine_not_found_and_a_state_refusal_engine_conflict() -> None:
    gone = docker.errors.NotFound("gone", response=_Answer(404), explanation="no such network")
    with pytest.raises(EngineNotFound, match="no such network"), map_docker_errors(DEFAULT_SOCKET):
        raise gone
    for code in (403, 409):
        busy = docker.errors.APIError("busy", response=_Answer(code), explanation="in use")
        with pytest.raises(EngineConflict, match="in use"), map_docker_errors(DEFAULT_SOCKET):
            raise busy
    other = docker.errors.APIError("bad", response=_Answer(500), explanation="boom")
    with pytest.raises(EngineError) as info, map_docker_errors(DEFAULT_SOCKET):
        raise other
    assert type(info.value) is EngineError


def test_full_address_pools_are_no_session_network_whatever_status_the_engine_gives() -> None:
    """Docker 20.10 answers 404 for it (the real engine: tests/faults/test_networks_exhausted)."""
    said = "could not find an available, non-overlapping IPv4 address pool among the defaults"
    for code in (404, 400, 500):
        full = docker.errors.NotFound if code == 404 else docker.errors.APIError
        exc = full("full", response=_Answer(code), explanation=said)
        with pytest.raises(NoSessionNetwork) as info, map_docker_errors(DEFAULT_SOCKET):
            raise exc
        assert "No session network free" in str(info.value) and DEFAULT_SOCKET in str(info.value)


def test_a_connection_failure_is_classified_into_an_unavailable_code(
    tmp_path: Path, dockerd_installed: None
) -> None:
    url = f"unix://{tmp_path}/docker.sock"

    with pytest.raises(SandboxUnavailable) as info, map_docker_errors(url):
        raise requests.exceptions.ConnectionError("Connection refused")

    assert info.value.code is UnavailableCode.DAEMON_UNREACHABLE


def test_errors_unrelated_to_the_engine_pass_through_unchanged() -> None:
    with pytest.raises(KeyError), map_docker_errors(DEFAULT_SOCKET):
        raise KeyError("mine")
