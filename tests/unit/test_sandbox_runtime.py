"""Issue 14's gVisor tier and engine capacity, without an engine: `[container.sandbox]
runtime` is validated and reaches the engine's arguments; a runsc run's command; what
`corral doctor` computes from `docker info`."""

from __future__ import annotations

import dataclasses

import docker.errors
import pytest
import requests

from orchestrator.backends.docker.capacity import (
    DOCKER_BUILTIN_POOLS,
    network_capacity,
    pool_capacity,
    runsc_registration,
    subnets_of,
)
from orchestrator.backends.docker.sdk import map_docker_errors
from orchestrator.backends.docker.spec import create_kwargs
from orchestrator.config import parse_config
from orchestrator.errors import ConfigError, SandboxUnavailable
from sandboxes.ports import ContainerSpec
from sandboxes.script_policy import RUNSC_ENVIRONMENT, build_script_spec, script_command

MARK = "corral-exit-0123456789abcdef"

pytestmark = pytest.mark.unit


def _spec(runtime: str, language: str | None = "python") -> ContainerSpec:
    return build_script_spec(
        image="corral-sandbox:latest",
        language=language,
        workspace_dir="/srv/w",
        user="1000:1000",
        labels={"corral.managed": "true"},
        tmp_size_mb=64,
        runtime=runtime,
        exit_mark=None if language is None else MARK,
    )


def test_the_runtime_defaults_to_runc_and_takes_runsc() -> None:
    assert parse_config({}, "config.toml").container.sandbox.runtime == "runc"
    config = parse_config({"container": {"sandbox": {"runtime": "runsc"}}}, "config.toml")
    assert config.container.sandbox.runtime == "runsc"


def test_an_unknown_runtime_is_refused_naming_the_key_and_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"container": {"sandbox": {"runtime": "kata"}}}, "config.toml")
    assert "container.sandbox.runtime" in str(info.value)
    assert "'runc' or 'runsc'" in str(info.value)


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_the_runtime_reaches_the_engine_arguments(runtime: str) -> None:
    spec = _spec(runtime)
    assert create_kwargs(spec)["runtime"] == runtime


def test_a_runsc_spec_differs_from_runc_only_in_runtime_command_and_tini_verbosity() -> None:
    runc, runsc = _spec("runc"), _spec("runsc")
    assert runsc.environment == {**runc.environment, **RUNSC_ENVIRONMENT}
    assert (
        dataclasses.replace(
            runsc,
            runtime="runc",
            command=runc.command,
            environment=runc.environment,
        )
        == runc
    )
    # gVisor has no child subreapers: tini runs without -s there, and only there
    assert "-s" in script_command("python", 60, exit_mark=MARK) and "-s" not in script_command(
        "python", 60, "runsc", exit_mark=MARK
    )
    assert _spec("runsc", None).command != _spec("runc", None).command


def test_an_unregistered_runtime_is_an_unavailable_sandbox_with_the_fix() -> None:
    response = requests.Response()
    response.status_code = 400
    error = docker.errors.APIError(
        "400", response, explanation="unknown or invalid runtime name: runsc"
    )
    with pytest.raises(SandboxUnavailable) as info, map_docker_errors("unix:///x.sock"):
        raise error
    assert "runtime" in info.value.reason
    assert "scripts/dockerd.json" in info.value.fix


def test_the_builtin_pools_hold_31_networks_and_a_24_pool_256() -> None:
    assert pool_capacity(DOCKER_BUILTIN_POOLS) == 31
    assert pool_capacity([("10.213.0.0/16", 24)]) == 256


def test_capacity_counts_only_networks_inside_the_pools() -> None:
    info = {"DefaultAddressPools": [{"Base": "10.213.0.0/16", "Size": 24}]}
    networks = [
        {"IPAM": {"Config": [{"Subnet": "10.213.0.0/24"}]}},
        {"IPAM": {"Config": [{"Subnet": "10.213.7.0/24"}]}},
        {"IPAM": {"Config": [{"Subnet": "172.18.0.0/16"}]}},  # made before the pools
        {"IPAM": {"Config": []}},  # host, none
    ]
    capacity = network_capacity(info, subnets_of(networks))
    assert (capacity.total, capacity.used, capacity.free) == (256, 2, 254)
    assert capacity.configured
    assert "254 more session networks fit" in capacity.describe()


def test_without_listed_pools_the_engine_defaults_are_used() -> None:
    capacity = network_capacity({}, ["172.17.0.0/16", "172.18.0.0/16"])
    assert not capacity.configured
    assert (capacity.total, capacity.free) == (31, 29)
    assert "built-in" in capacity.describe()


def test_runsc_registration_is_read_from_the_runtimes() -> None:
    info = {"Runtimes": {"runc": {"path": "runc"}}}
    assert runsc_registration(info) is None
    info["Runtimes"]["runsc"] = {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace"]}
    assert runsc_registration(info) == "/usr/bin/runsc --platform=ptrace"


def test_the_kiosk_pool_size_is_unset_by_default_and_bounded() -> None:
    assert (
        parse_config({}, "config.toml").container.kiosk.warm is None
    )  # tests/unit/test_warm_sizes
    config = parse_config({"container": {"kiosk": {"warm": 3}}}, "config.toml")
    assert config.container.kiosk.warm == 3
    with pytest.raises(ConfigError) as info:
        parse_config({"container": {"kiosk": {"warm": 17}}}, "config.toml")
    assert "container.kiosk.warm" in str(info.value)
    assert "less than or equal to 16" in str(info.value)
