"""Visible <=> callable (SPEC S5.2, S5.4): pattern matching, `decide` and `permission_refusal`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.config import load_agent
from orchestrator.errors import ConfigError
from sandboxes.catalogue import BY_NAME, CATALOGUE
from sandboxes.visibility import (
    AgentView,
    decide,
    pattern_matches,
    pattern_problem,
    permission_refusal,
    visible_names,
)
from tests.helpers import COMPUTER_TOOLS

pytestmark = pytest.mark.unit

PROPERTY = settings(database=None, deadline=None, max_examples=200)

CODRIVE_TOOLS = frozenset({"codrive_run", "codrive_status"})
ALL_TOOLS = frozenset(spec.name for spec in CATALOGUE)
EVERYTHING_ON = frozenset(
    {"computer_use", "codrive", "browser_use", "desktop_use", "mobile_use", "ios_use", "recording"}
)
RIG_TOOLS = frozenset(
    {"browser_use", "computer_use", "mobile_use", "ios_use", "rig_list", "rig_close"}
)


def view(**changes: object) -> AgentView:
    return dataclasses.replace(AgentView(name="ann"), **changes)  # type: ignore[arg-type]


# ------------------------------------------------------------------ pattern_matches

MATCHING_RULES = [
    # (pattern, tool, matches)
    pytest.param("execute_program", "execute_program", True, id="exact-name"),
    pytest.param("execute_program", "execute_programs", False, id="exact-name-is-not-a-prefix"),
    pytest.param("execute_programs", "execute_program", False, id="exact-name-longer"),
    pytest.param("computer_click", "computer_click", True, id="exact-computer-name"),
    pytest.param("computer_click", "computer_type", False, id="exact-other-name"),
    pytest.param("Execute_Program", "execute_program", False, id="exact-is-case-sensitive"),
    pytest.param("*", "execute_program", True, id="star-matches-execute_program"),
    pytest.param("*", "computer_click", True, id="star-matches-computer"),
    pytest.param("*", "codrive_status", True, id="star-matches-codrive"),
    pytest.param("mcp__corral__*", "execute_program", True, id="own-prefix-star"),
    pytest.param("mcp__corral__*", "codrive_run", True, id="own-prefix-star-codrive"),
    pytest.param("mcp__corral__computer_*", "computer_click", True, id="own-prefix-family-star"),
    pytest.param(
        "mcp__corral__computer_*",
        "computer_session_start",
        True,
        id="own-prefix-family-star-other-member",
    ),
    pytest.param(
        "mcp__corral__computer_*", "execute_program", False, id="own-prefix-family-star-outsider"
    ),
    pytest.param(
        "mcp__corral__computer_*", "codrive_run", False, id="own-prefix-family-star-codrive"
    ),
    pytest.param("computer_*", "computer_click", True, id="family-star"),
    pytest.param("computer_*", "computer_session_stop", True, id="family-star-other-member"),
    pytest.param("computer_*", "execute_program", False, id="family-star-outsider"),
    pytest.param("codrive_*", "codrive_status", True, id="codrive-family-star"),
    pytest.param("codrive_*", "computer_click", False, id="codrive-family-star-outsider"),
    pytest.param(
        "mcp__corral__execute_program", "execute_program", True, id="own-prefix-exact-name"
    ),
    pytest.param(
        "mcp__corral__execute_program", "computer_click", False, id="own-prefix-exact-other"
    ),
    pytest.param(
        "mcp__corral__execute_program",
        "mcp__corral__execute_program",
        False,
        id="own-prefix-is-stripped-once",
    ),
    pytest.param("comp*ter_click", "computer_click", False, id="inner-star-is-literal"),
    pytest.param("comp*ter_click", "comp*ter_click", True, id="inner-star-matches-itself"),
    pytest.param("*_click", "computer_click", False, id="leading-star-is-literal"),
    pytest.param("*_click", "*_click", True, id="leading-star-matches-itself"),
    pytest.param("*computer_*", "computer_click", False, id="star-both-ends-leading-literal"),
    pytest.param("mcp__other__*", "execute_program", False, id="other-server-star"),
    pytest.param("mcp__other__*", "computer_click", False, id="other-server-star-computer"),
    pytest.param(
        "mcp__other__execute_program", "execute_program", False, id="other-server-exact-name"
    ),
    pytest.param("mcp__corralx__*", "execute_program", False, id="similar-server-name-star"),
    pytest.param(
        "mcp__corralx__execute_program", "execute_program", False, id="similar-server-name-exact"
    ),
    pytest.param("mcp__corra__*", "execute_program", False, id="shorter-server-name-star"),
    pytest.param("mcp__corral__", "execute_program", False, id="own-prefix-alone"),
    pytest.param("mcp__corral__", "computer_click", False, id="own-prefix-alone-computer"),
    pytest.param("", "execute_program", False, id="empty-pattern"),
    pytest.param("   ", "execute_program", False, id="blank-pattern"),
    pytest.param("  execute_program  ", "execute_program", True, id="spaces-around-exact"),
    pytest.param("\texecute_program\n", "execute_program", True, id="tab-newline-around-exact"),
    pytest.param(" computer_* ", "computer_click", True, id="spaces-around-family-star"),
    pytest.param(" * ", "codrive_status", True, id="spaces-around-star"),
    pytest.param(" mcp__corral__* ", "execute_program", True, id="spaces-around-own-prefix"),
    pytest.param(" mcp__other__* ", "execute_program", False, id="spaces-around-other-server"),
    pytest.param("execute program", "execute_program", False, id="inner-space-is-literal"),
]


@pytest.mark.parametrize(("pattern", "tool", "matches"), MATCHING_RULES)
def test_each_s5_2_matching_rule_decides_whether_a_pattern_names_a_tool(
    pattern: str, tool: str, matches: bool
) -> None:
    assert pattern_matches(pattern, tool) is matches


SERVER_NAMES = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12
).filter(lambda server: server != "corral")


@PROPERTY
@given(server=SERVER_NAMES, rest=st.sampled_from(["*", "", "execute_program", "computer_*"]))
def test_another_servers_prefix_never_matches_any_corral_tool(server: str, rest: str) -> None:
    pattern = f"mcp__{server}__{rest}"

    assert not any(pattern_matches(pattern, tool) for tool in ALL_TOOLS)


@PROPERTY
@given(tool=st.sampled_from(sorted(ALL_TOOLS)), other=st.sampled_from(sorted(ALL_TOOLS)))
def test_a_tool_name_with_or_without_the_own_prefix_matches_only_that_tool(
    tool: str, other: str
) -> None:
    assert pattern_matches(tool, other) is (tool == other)
    assert pattern_matches(f"mcp__corral__{tool}", other) is (tool == other)


@PROPERTY
@given(tool=st.sampled_from(sorted(ALL_TOOLS)), cut=st.integers(0, 30))
def test_a_trailing_star_after_any_prefix_of_a_tool_name_matches_that_tool(
    tool: str, cut: int
) -> None:
    prefix = tool[: min(cut, len(tool))]

    assert pattern_matches(prefix + "*", tool)
    assert pattern_matches(f"mcp__corral__{prefix}*", tool)


# ------------------------------------------------------------------ decide / visible_names


def test_a_fresh_agent_sees_exactly_execute_program() -> None:
    assert visible_names(AgentView(name="ann")) == {"execute_program"}


def test_turning_computer_use_on_shows_the_eight_computer_tools() -> None:
    names = visible_names(view(capabilities=frozenset({"computer_use"})))

    assert names == COMPUTER_TOOLS | {"execute_program"}


def test_turning_codrive_on_shows_codrive_run_and_codrive_status() -> None:
    names = visible_names(view(capabilities=frozenset({"codrive"})))

    assert names == CODRIVE_TOOLS | {"execute_program"}


def test_every_family_on_shows_the_whole_catalogue() -> None:
    assert visible_names(view(capabilities=EVERYTHING_ON)) == ALL_TOOLS


def test_a_capability_corral_does_not_know_shows_nothing_extra() -> None:
    assert visible_names(view(capabilities=frozenset({"teleport"}))) == {"execute_program"}


def test_denied_tools_beats_allowed_tools() -> None:
    agent = view(
        capabilities=EVERYTHING_ON,
        allowed_tools=("execute_program", "computer_*"),
        denied_tools=("computer_click",),
    )

    # computer_* also names the desktop rig's computer_use (SPEC S4.1a keeps that name)
    assert visible_names(agent) == (COMPUTER_TOOLS - {"computer_click"}) | {
        "execute_program",
        "computer_use",
    }
    decision = decide(BY_NAME["computer_click"], agent)
    assert not decision.visible
    assert "computer_click" in decision.message
    assert "denied_tools" in decision.message


def test_a_denied_tool_listed_exactly_in_allowed_tools_stays_hidden() -> None:
    agent = view(allowed_tools=("execute_program",), denied_tools=("execute_program",))

    assert visible_names(agent) == frozenset()


def test_a_non_empty_allowed_tools_hides_every_tool_it_does_not_name() -> None:
    agent = view(capabilities=EVERYTHING_ON, allowed_tools=("computer_click", "codrive_*"))

    assert visible_names(agent) == {"computer_click"} | CODRIVE_TOOLS
    decision = decide(BY_NAME["execute_program"], agent)
    assert not decision.visible
    assert "execute_program" in decision.message
    assert "allowed_tools" in decision.message


def test_allowed_tools_does_not_turn_a_family_on() -> None:
    agent = view(allowed_tools=("*",))

    assert visible_names(agent) == {"execute_program"}
    decision = decide(BY_NAME["computer_click"], agent)
    assert not decision.visible
    assert "[capabilities] computer_use is off" in decision.message


def test_denied_star_with_the_own_prefix_hides_everything() -> None:
    assert visible_names(view(capabilities=EVERYTHING_ON, denied_tools=("mcp__corral__*",))) == (
        frozenset()
    )


def test_denied_tools_with_another_servers_prefix_hides_nothing() -> None:
    agent = view(
        capabilities=EVERYTHING_ON,
        denied_tools=("mcp__other__*", "mcp__other__execute_program", "mcp__corralx__*"),
    )

    assert visible_names(agent) == ALL_TOOLS


def test_allowed_tools_naming_only_other_servers_hides_every_corral_tool() -> None:
    agent = view(capabilities=EVERYTHING_ON, allowed_tools=("mcp__other__*",))

    assert visible_names(agent) == frozenset()


def test_read_only_hides_every_tool_that_declares_an_action_class() -> None:
    agent = view(capabilities=EVERYTHING_ON, read_only=True)

    assert visible_names(agent) == {"codrive_status", "rig_list", "recording_list", "recording_get"}
    for name in sorted(
        COMPUTER_TOOLS | RIG_TOOLS - {"rig_list"} | {"execute_program", "codrive_run"}
    ):
        decision = decide(BY_NAME[name], agent)
        assert not decision.visible, name
        assert name in decision.message
        assert "read-only" in decision.message
        for action_class in BY_NAME[name].action_classes:
            assert action_class in decision.message


def test_read_only_hides_exactly_the_tools_with_action_classes() -> None:
    agent = view(capabilities=EVERYTHING_ON, read_only=True)

    assert visible_names(agent) == {spec.name for spec in CATALOGUE if not spec.action_classes}


def test_a_scoped_tool_is_hidden_until_its_exact_name_is_granted() -> None:
    scoped = view(scoped_tools=("execute_program",))

    decision = decide(BY_NAME["execute_program"], scoped)
    assert not decision.visible
    assert "execute_program" in decision.message
    assert "scoped" in decision.message
    assert "grant" in decision.message
    assert visible_names(scoped) == frozenset()
    assert visible_names(dataclasses.replace(scoped, grants=frozenset({"execute_program"}))) == {
        "execute_program"
    }


@pytest.mark.parametrize(
    "grant",
    ["mcp__corral__execute_program", "execute_*", "*", "Execute_Program", " execute_program"],
)
def test_a_scoped_tool_stays_hidden_when_the_grant_is_not_its_exact_name(grant: str) -> None:
    agent = view(scoped_tools=("execute_program",), grants=frozenset({grant}))

    assert "execute_program" not in visible_names(agent)


def test_scoped_tools_patterns_scope_each_matching_tool_separately() -> None:
    agent = view(
        capabilities=frozenset({"computer_use"}),
        scoped_tools=("mcp__corral__computer_*",),
        grants=frozenset({"computer_click"}),
    )

    assert visible_names(agent) == {"execute_program", "computer_click"}


def test_a_grant_for_a_tool_that_is_not_scoped_changes_nothing() -> None:
    agent = view(grants=frozenset({"computer_click"}))

    assert visible_names(agent) == {"execute_program"}


def test_a_grant_does_not_override_a_family_that_is_off() -> None:
    agent = view(scoped_tools=("computer_click",), grants=frozenset({"computer_click"}))

    assert "computer_click" not in visible_names(agent)


def test_a_file_problem_turns_every_optional_family_off_and_says_agent_toml_is_unusable() -> None:
    # What load_view builds for an agent.toml that exists but cannot be used.
    agent = view(file_problem="not valid TOML: bad value")

    assert visible_names(agent) == {"execute_program"}
    for name in sorted(COMPUTER_TOOLS | CODRIVE_TOOLS):
        decision = decide(BY_NAME[name], agent)
        assert not decision.visible
        assert name in decision.message
        assert "agent.toml could not be used" in decision.message
        assert "not valid TOML: bad value" in decision.message


def test_a_family_that_is_off_is_refused_naming_the_capability_flag() -> None:
    for name in sorted(COMPUTER_TOOLS):
        decision = decide(BY_NAME[name], AgentView(name="ann"))
        assert not decision.visible
        assert decision.message == (
            f"{name} is not enabled for agent ann: [capabilities] computer_use is off"
        )
    for name in sorted(CODRIVE_TOOLS):
        decision = decide(BY_NAME[name], AgentView(name="ann"))
        assert decision.message == (
            f"{name} is not enabled for agent ann: [capabilities] codrive is off"
        )


def test_a_visible_decision_carries_no_message() -> None:
    decision = decide(BY_NAME["execute_program"], AgentView(name="ann"))

    assert decision.visible
    assert decision.message == ""


VIEWS = st.builds(
    AgentView,
    name=st.sampled_from(["ann", "bob-2"]),
    capabilities=st.frozensets(st.sampled_from(["computer_use", "codrive", "desktop_use"])),
    read_only=st.booleans(),
    allowed_tools=st.lists(
        st.sampled_from(["*", "computer_*", "execute_program", "mcp__corral__codrive_*", "x"]),
        max_size=3,
    ).map(tuple),
    denied_tools=st.lists(
        st.sampled_from(["computer_click", "codrive_*", "mcp__other__*", "execute_program"]),
        max_size=2,
    ).map(tuple),
    scoped_tools=st.lists(st.sampled_from([*sorted(ALL_TOOLS), "*"]), max_size=2).map(tuple),
    grants=st.frozensets(st.sampled_from(sorted(ALL_TOOLS))),
    file_problem=st.sampled_from([None, "not valid TOML"]),
)


@PROPERTY
@given(agent=VIEWS)
def test_every_refusal_names_the_tool_and_the_agent_or_reason(agent: AgentView) -> None:
    for spec in CATALOGUE:
        decision = decide(spec, agent)
        if decision.visible:
            assert decision.message == ""
            assert spec.name in visible_names(agent)
        else:
            assert decision.message.startswith(spec.name + " ")
            assert any(
                reason in decision.message
                for reason in (
                    "denied_tools",
                    "allowed_tools",
                    "[capabilities]",
                    "agent.toml",
                    "read-only",
                    "scoped",
                )
            )
            assert spec.name not in visible_names(agent)


@PROPERTY
@given(agent=VIEWS)
def test_adding_a_denied_pattern_never_shows_more_tools(agent: AgentView) -> None:
    stricter = dataclasses.replace(agent, denied_tools=(*agent.denied_tools, "computer_*"))

    assert visible_names(stricter) <= visible_names(agent)
    assert not any(name.startswith("computer_") for name in visible_names(stricter))


# ------------------------------------------------------------------ permission_refusal


def test_permissions_execute_program_false_refuses_execute_program() -> None:
    agent = view(permissions={"execute_program": False})

    refusal = permission_refusal(BY_NAME["execute_program"], agent)

    assert refusal is not None
    assert "execute_program" in refusal
    assert "[permissions] execute_program = false" in refusal
    assert "ann" in refusal
    # S5.4: listed but refused.
    assert "execute_program" in visible_names(agent)


def test_permissions_execute_program_true_allows_execute_program() -> None:
    agent = view(permissions={"execute_program": True})

    assert permission_refusal(BY_NAME["execute_program"], agent) is None


def test_an_agent_toml_that_could_not_be_used_refuses_permission_gated_tools() -> None:
    agent = view(file_problem="key 'capabilities.color': unknown key")

    refusal = permission_refusal(BY_NAME["execute_program"], agent)

    assert refusal is not None
    assert "execute_program" in refusal
    assert "agent.toml could not be used" in refusal
    assert "key 'capabilities.color': unknown key" in refusal
    assert "execute_program" in visible_names(agent)


def test_a_missing_agent_toml_default_view_allows_execute_program() -> None:
    assert permission_refusal(BY_NAME["execute_program"], AgentView(name="ann")) is None


@pytest.mark.parametrize(
    "spec", [spec for spec in CATALOGUE if spec.permission is None], ids=lambda spec: spec.name
)
def test_a_tool_without_a_permission_flag_is_never_refused_by_permissions(spec: object) -> None:
    for agent in (
        view(permissions={"execute_program": False}),
        view(file_problem="not valid TOML"),
        view(permissions={"computer_click": False, spec.name: False}),  # type: ignore[attr-defined]
    ):
        assert permission_refusal(spec, agent) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("pattern", ["mcp__*", "mcp__corral*", "mcp__corral__*", "*"])
def test_a_deny_list_meant_to_hide_everything_hides_everything(pattern: str) -> None:
    agent = view(capabilities=EVERYTHING_ON, denied_tools=(pattern,))

    assert visible_names(agent) == frozenset()
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("Execute_program", "lower case"),
        ("mcp__other__*", "another MCP server"),
        ("mcp__corra__*", "another MCP server"),
        ("mcp__corral__", "lower-case letters"),
        ("exec*ute", "only works at the end"),
        ("computer-click", "lower-case letters"),
        (" execute_program", "spaces"),
        ("", "empty"),
    ],
)
def test_a_pattern_that_can_never_match_says_why(pattern: str, says: str) -> None:
    problem = pattern_problem(pattern)

    assert problem is not None and says in problem
    if pattern == pattern.strip():  # spaces around are stripped when matching
        assert not any(pattern_matches(pattern, spec.name) for spec in CATALOGUE)


@pytest.mark.parametrize("key", ["allowed_tools", "denied_tools", "scoped_tools"])
def test_a_pattern_that_can_never_match_is_a_config_error_naming_file_key_and_pattern(
    tmp_path: Path, key: str
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(f'name = "alice"\n[capabilities]\n{key} = ["execute_program", "mcp__*x"]\n')

    with pytest.raises(ConfigError) as caught:
        load_agent(path)

    message = str(caught.value)
    assert str(path) in message
    assert f"capabilities.{key}.1" in message
    assert "'mcp__*x'" in message
    assert "can never match a corral tool" in message
