"""Host names in config are checked when the file is loaded (allowed_domains, deny_list,
resolve_overrides): a bad entry is an error naming the file, the key and the entry,
never an "internal error in the gateway" at session start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import load_agent, load_config
from orchestrator.errors import ConfigError
from sandboxes.hostnames import deny_entry_problem, host_entry_problem

pytestmark = pytest.mark.unit


def agent_file(tmp_path: Path, **cfg: list[str]) -> Path:
    table = "".join(f"{k} = {json.dumps(v, ensure_ascii=False)}\n" for k, v in cfg.items())
    path = tmp_path / "agent.toml"
    path.write_text(f'name = "alice"\n[capabilities.computer_use_config]\n{table}')
    return path


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("Bücher.example", "IDNA form: 'xn--bcher-kva.example'"),
        ("site.example.", "drop the trailing dot: write 'site.example'"),
        ("Site.Example", "lower case: 'site.example'"),
        (" site.example", "whitespace"),
        ("site .example", "whitespace"),
        ("*.site.example", "wildcards are not supported"),
        ("site.example:443", "without a port"),
        ("https://site.example", "without scheme"),
        ("", "must not be empty"),
        ("-bad.example", "is not a host name"),
        ("a" * 64 + ".example", "is not a host name"),
        ("010.1.2.3", "is not a host name"),
    ],
)
def test_a_bad_allowed_domain_names_file_key_and_entry(
    tmp_path: Path, entry: str, says: str
) -> None:
    path = agent_file(tmp_path, allowed_domains=["ok.example", entry])

    with pytest.raises(ConfigError) as caught:
        load_agent(path)

    message = str(caught.value)
    assert str(path) in message
    assert "capabilities.computer_use_config.allowed_domains.1" in message
    assert repr(entry) in message
    assert says in message


@pytest.mark.parametrize(
    "entry", ["site.example", "xn--bcher-kva.example", "a-b.c-d.example", "192.0.2.7", "::1"]
)
def test_canonical_host_entries_are_accepted(tmp_path: Path, entry: str) -> None:
    agent = load_agent(agent_file(tmp_path, allowed_domains=[entry], deny_list=[entry]))

    assert agent.capabilities.computer_use_config.allowed_domains == [entry]
    assert host_entry_problem(entry) is None


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("ftp://files.example/", "must start with https:// or http://"),
        ("https://Bank.example/pay", "the URL's host 'Bank.example': write it in lower case"),
        ("https://bank.example./pay", "drop the trailing dot"),
        ("https://*.bank.example/", "wildcards are not supported"),
        ("bank .example", "whitespace"),
    ],
)
def test_a_bad_deny_list_entry_names_the_key_and_the_entry(
    tmp_path: Path, entry: str, says: str
) -> None:
    path = agent_file(tmp_path, deny_list=[entry])

    with pytest.raises(ConfigError) as caught:
        load_agent(path)

    assert "capabilities.computer_use_config.deny_list.0" in str(caught.value)
    assert says in str(caught.value)
    assert deny_entry_problem(entry) is not None


def test_deny_list_url_prefixes_and_hosts_are_accepted(tmp_path: Path) -> None:
    entries = ["bank.example", "https://shop.example/checkout", "http://old.example/"]

    agent = load_agent(agent_file(tmp_path, deny_list=entries))

    assert agent.capabilities.computer_use_config.deny_list == entries


@pytest.mark.parametrize(
    ("table", "key", "says"),
    [
        ('"Site.test" = "172.18.0.5"', "Site.test", "lower case"),
        ('"site.test." = "172.18.0.5"', "site.test.", "trailing dot"),
        ('"site.test" = "::1"', "resolve_overrides.site.test", "IPv4 address"),
        ('"site.test" = "010.1.1.1"', "resolve_overrides.site.test", "IPv4 address"),
        ('"site.test" = "not-an-ip"', "resolve_overrides.site.test", "IPv4 address"),
    ],
)
def test_a_bad_resolve_override_names_the_key(
    tmp_path: Path, table: str, key: str, says: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[container.kiosk.resolve_overrides]\n{table}\n")

    with pytest.raises(ConfigError) as caught:
        load_config(path)

    assert str(path) in str(caught.value)
    assert key in str(caught.value)
    assert says in str(caught.value)


def test_a_good_resolve_override_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[container.kiosk.resolve_overrides]\n"site.test" = "172.18.0.5"\n')

    assert load_config(path).container.kiosk.resolve_overrides == {"site.test": "172.18.0.5"}
