"""config.toml and agent.toml: defaults, validation errors naming file + key + what is allowed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.config import (
    DEFAULT_BASE_IMAGE,
    DEFAULT_SANDBOX_IMAGE,
    AgentConfig,
    Capabilities,
    load_agent,
    load_config,
    render_new_agent,
)
from orchestrator.errors import ConfigError

pytestmark = pytest.mark.unit


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value


# ------------------------------------------------------------------ config.toml


def test_defaults_are_in_force_when_config_toml_is_absent(tmp_path: Path) -> None:
    config = load_config(tmp_path / "config.toml")

    assert config.gateway.host == "127.0.0.1"
    assert config.gateway.port == 9030
    assert config.container.backend == "docker"
    assert config.container.docker_host is None
    assert config.container.sandbox.image == DEFAULT_SANDBOX_IMAGE
    assert config.container.sandbox.base_image == DEFAULT_BASE_IMAGE
    assert config.container.sandbox.script_when_unavailable == "refuse"
    assert config.container.sandbox.tmp_size_mb == 64


def test_an_empty_config_toml_means_every_default(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "")

    assert load_config(path) == load_config(tmp_path / "absent.toml")


def test_valid_values_in_config_toml_are_loaded(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.toml",
        """
[gateway]
host = "::1"
port = 9999

[container]
docker_host = "tcp://127.0.0.1:2375"

[container.sandbox]
image = "registry.example.com:5000/team/sandbox:v1.2"
script_when_unavailable = "run_unsandboxed"
tmp_size_mb = 128
""",
    )

    config = load_config(path)

    assert config.gateway.host == "::1"
    assert config.gateway.port == 9999
    assert config.container.docker_host == "tcp://127.0.0.1:2375"
    assert config.container.sandbox.image == "registry.example.com:5000/team/sandbox:v1.2"
    assert config.container.sandbox.script_when_unavailable == "run_unsandboxed"
    assert config.container.sandbox.tmp_size_mb == 128


@pytest.mark.parametrize(
    ("line", "key", "allowed"),
    [
        (
            'script_when_unavailable = "yes"',
            "container.sandbox.script_when_unavailable",
            ["'refuse'", "'run_unsandboxed'", "'yes'"],
        ),
        ("tmp_size_mb = 4", "container.sandbox.tmp_size_mb", ["greater than or equal to 8"]),
        ("tmp_size_mb = 4096", "container.sandbox.tmp_size_mb", ["less than or equal to 1024"]),
        ("max_concurrent = 0", "container.sandbox.max_concurrent", ["greater than or equal to 1"]),
        ("max_concurrent = 257", "container.sandbox.max_concurrent", ["less than or equal to 256"]),
        ("max_queued = -1", "container.sandbox.max_queued", ["greater than or equal to 0"]),
        ("max_queued = 1001", "container.sandbox.max_queued", ["less than or equal to 1000"]),
        ("warm = -1", "container.sandbox.warm", ["greater than or equal to 0"]),
        ("warm = 17", "container.sandbox.warm", ["less than or equal to 16"]),
        (
            "queue_timeout_seconds = 601",
            "container.sandbox.queue_timeout_seconds",
            ["less than or equal to 600"],
        ),
        (
            'image = "Bad Image"',
            "container.sandbox.image",
            ["Docker image reference", "'Bad Image'"],
        ),
        (
            'base_image = "UPPER:case"',
            "container.sandbox.base_image",
            ["Docker image reference", "'UPPER:case'"],
        ),
    ],
)
def test_a_bad_sandbox_value_is_an_error_naming_file_key_and_what_is_allowed(
    tmp_path: Path, line: str, key: str, allowed: list[str]
) -> None:
    path = write(tmp_path / "config.toml", f"[container.sandbox]\n{line}\n")

    error = config_error(path)

    message = str(error)
    assert error.file == str(path)
    assert str(path) in message
    assert f"'{key}'" in message
    for fragment in allowed:
        assert fragment in message
    assert len(error.problems) == 1


def test_an_image_reference_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.toml", '[container.sandbox]\nimage = "corral-sandbox:latest\\n"\n'
    )

    assert "'container.sandbox.image'" in str(config_error(path))


def test_a_gateway_host_that_is_not_loopback_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", '[gateway]\nhost = "0.0.0.0"\n')

    message = str(config_error(path))

    assert "'gateway.host'" in message
    assert "'127.0.0.1'" in message


def test_an_unknown_key_is_reported_with_its_dotted_name(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", '[container.sandbox]\nimgae = "corral-sandbox:latest"\n')

    error = config_error(path)

    assert str(path) in str(error)
    assert error.problems == [
        "key 'container.sandbox.imgae': unknown key "
        "(check the spelling; see docs/operator.md for the keys)"
    ]


@pytest.mark.parametrize("value", ["-1", "16777217", '"big"'])
def test_the_inline_image_limit_is_refused_out_of_range_naming_the_key(
    tmp_path: Path, value: str
) -> None:
    path = write(tmp_path / "config.toml", f"[mcp]\ninline_image_max_bytes = {value}\n")

    assert "'mcp.inline_image_max_bytes'" in str(config_error(path))


def test_an_unknown_top_level_table_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "[gatway]\nport = 1\n")

    assert "'gatway'" in str(config_error(path))


def test_an_integrations_table_is_an_unknown_key_since_nothing_reads_it(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", '[integrations.slack]\nchannel = "ops"\n')

    assert "'integrations'" in str(config_error(path))


def test_every_bad_key_is_reported_not_only_the_first(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.toml",
        '[gateway]\nport = 0\n[container.sandbox]\nscript_when_unavailable = "yes"\n',
    )

    message = str(config_error(path))

    assert "'gateway.port'" in message
    assert "'container.sandbox.script_when_unavailable'" in message


def test_invalid_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", "[container.sandbox\nimage = \n")

    error = config_error(path)

    assert error.file == str(path)
    assert str(path) in str(error)
    assert "not valid TOML" in str(error)


def test_an_unreadable_config_path_is_reported_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.mkdir()

    error = config_error(path)

    assert str(path) in str(error)
    assert "cannot be read" in str(error)


# ------------------------------------------------------------------ agent.toml


def test_a_new_agent_round_trips_through_load_agent(tmp_path: Path) -> None:
    path = write(tmp_path / "agents" / "alice" / "agent.toml", render_new_agent("alice"))

    agent = load_agent(path)

    assert agent.name == "alice"
    assert agent.permissions.execute_program is True
    assert agent.capabilities.computer_use_config.max_actions == 50
    assert agent.capabilities.computer_use_config.allowed_domains == []


def test_a_new_agent_has_every_optional_capability_off() -> None:
    agent = AgentConfig.model_validate(tomllib.loads(render_new_agent("bob")))

    flags = {
        name: getattr(agent.capabilities, name)
        for name, field in Capabilities.model_fields.items()
        if field.annotation is bool
    }
    assert set(flags) >= {
        "computer_use",
        "codrive",
        "browser_use",
        "mobile_use",
        "ios_use",
        "read_only",
    }
    assert not any(flags.values()), flags
    assert agent.capabilities.allowed_tools == []
    assert agent.capabilities.scoped_tools == []


def test_the_new_agent_template_spells_out_every_capability_key() -> None:
    table = tomllib.loads(render_new_agent("carol"))["capabilities"]

    assert set(table) == set(Capabilities.model_fields)


@pytest.mark.parametrize(
    "name",
    ["Alice", "1alice", "-alice", "_alice", "al ice", "al.ice", "../etc", "", "a" * 64, "alice\n"],
)
def test_a_bad_agent_name_is_rejected(name: str) -> None:
    with pytest.raises(ValidationError):
        AgentConfig(name=name)


@pytest.mark.parametrize("name", ["a", "alice", "ops-bot_2", "a" * 63])
def test_a_good_agent_name_is_accepted(name: str) -> None:
    assert AgentConfig(name=name).name == name


def test_a_bad_agent_name_in_agent_toml_is_an_error_naming_the_key(tmp_path: Path) -> None:
    path = write(tmp_path / "agent.toml", 'name = "Bad Name"\n')

    with pytest.raises(ConfigError) as info:
        load_agent(path)

    assert str(path) in str(info.value)
    assert "key 'name'" in str(info.value)
    assert "lower-case letter" in str(info.value)


def test_an_agent_toml_without_a_name_says_the_key_is_required(tmp_path: Path) -> None:
    path = write(tmp_path / "agent.toml", "[capabilities]\ncodrive = false\n")

    with pytest.raises(ConfigError) as info:
        load_agent(path)

    assert info.value.problems == ["key 'name': required but missing"]


def test_a_typo_in_an_agent_capability_is_an_unknown_key(tmp_path: Path) -> None:
    path = write(tmp_path / "agent.toml", 'name = "alice"\n[capabilities]\ncomputeruse = true\n')

    with pytest.raises(ConfigError) as info:
        load_agent(path)

    assert "'capabilities.computeruse'" in str(info.value)
    assert "unknown key" in str(info.value)


def test_an_agent_toml_written_with_the_old_os_native_key_still_loads(tmp_path: Path) -> None:
    text = 'name = "alice"\n[capabilities]\nos_native = true\ncodrive = true\n'
    path = write(tmp_path / "agent.toml", text)

    agent = load_agent(path)

    assert agent.capabilities.codrive is True
    assert "os_native" not in Capabilities.model_fields


def test_a_missing_agent_toml_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "agents" / "ghost" / "agent.toml"

    with pytest.raises(ConfigError) as info:
        load_agent(path)

    assert str(path) in str(info.value)
    assert "cannot be read" in str(info.value)


def test_max_actions_out_of_range_is_an_error_naming_the_nested_key(tmp_path: Path) -> None:
    path = write(
        tmp_path / "agent.toml",
        'name = "alice"\n[capabilities.computer_use_config]\nmax_actions = 0\n',
    )

    with pytest.raises(ConfigError) as info:
        load_agent(path)

    assert "'capabilities.computer_use_config.max_actions'" in str(info.value)
