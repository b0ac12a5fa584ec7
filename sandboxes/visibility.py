"""Visible <=> callable (SPEC S5.2): one predicate decides tools/list and dispatch.

Pure logic: an `AgentView` (what the agent's files and grants say) and a
`ToolSpec` in, a `Decision` out. `tools/list` lists the tools whose decision
is `visible`; the dispatch gate refuses everything else with the decision's
own message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sandboxes.catalogue import CATALOGUE, ToolSpec
from sandboxes.tool_patterns import OWN_PREFIX, SERVER_NAME, pattern_matches, pattern_problem

__all__ = ["OWN_PREFIX", "SERVER_NAME", "pattern_matches", "pattern_problem"]


def any_matches(patterns: Iterable[str], tool: str) -> bool:
    return any(pattern_matches(pattern, tool) for pattern in patterns)


@dataclass(frozen=True, slots=True)
class AgentView:
    """What one agent may see, as its files said when last read."""

    name: str
    capabilities: frozenset[str] = frozenset()
    read_only: bool = False
    allowed_tools: tuple[str, ...] = ()
    denied_tools: tuple[str, ...] = ()
    scoped_tools: tuple[str, ...] = ()
    grants: frozenset[str] = frozenset()
    permissions: dict[str, bool] = field(default_factory=dict)
    # None: agent.toml absent (defaults) or valid. Text: it exists but could not be used.
    file_problem: str | None = None
    # Families the server cannot serve whatever agent.toml says (a phone family with no
    # device configured), each with why: their tools are neither listed nor callable.
    unavailable: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    visible: bool
    message: str = ""


def decide(spec: ToolSpec, view: AgentView) -> Decision:
    """Whether `view` may see and call `spec`, and the refusal message if not."""
    tool = spec.name
    if any_matches(view.denied_tools, tool):
        return Decision(
            False, f"{tool} is denied for agent {view.name} by [capabilities] denied_tools"
        )
    if view.allowed_tools and not any_matches(view.allowed_tools, tool):
        return Decision(False, f"{tool} is not in agent {view.name}'s [capabilities] allowed_tools")
    needed = spec.capabilities
    if needed and not any(flag in view.capabilities for flag in needed):
        flags = " and ".join(needed) + (" are all" if len(needed) > 1 else " is")
        reason = (
            f"agent.toml could not be used ({view.file_problem}), so every optional family is off"
            if view.file_problem
            else f"[capabilities] {flags} off"
        )
        return Decision(False, f"{tool} is not enabled for agent {view.name}: {reason}")
    if needed and not any(f in view.capabilities and f not in view.unavailable for f in needed):
        why = "; ".join(view.unavailable[f] for f in needed if f in view.unavailable)
        return Decision(False, f"{tool} is not available on this server: {why}")
    if view.read_only and spec.action_classes:
        return Decision(
            False,
            f"{tool} is refused in read-only mode (it declares {', '.join(spec.action_classes)})",
        )
    if any_matches(view.scoped_tools, tool) and tool not in view.grants:
        return Decision(
            False,
            f"{tool} is scoped for agent {view.name} and no grant is active; "
            "an operator grants it with `corral grants add`",
        )
    return Decision(True)


def visible_tools(view: AgentView) -> tuple[ToolSpec, ...]:
    return tuple(spec for spec in CATALOGUE if decide(spec, view).visible)


def visible_names(view: AgentView) -> frozenset[str]:
    return frozenset(spec.name for spec in visible_tools(view))


def permission_refusal(spec: ToolSpec, view: AgentView) -> str | None:
    """S5.4: a listed tool refused by a `[permissions]` flag, or None when allowed.

    An agent.toml that exists but cannot be read or parsed refuses these tools;
    a missing one allows them.
    """
    if spec.permission is None:
        return None
    if view.file_problem:
        return (
            f"{spec.name} is refused: agent {view.name}'s agent.toml could not be used "
            f"({view.file_problem})"
        )
    if not view.permissions.get(spec.permission, True):
        return f"{spec.name} is refused: [permissions] {spec.permission} = false for {view.name}"
    return None
