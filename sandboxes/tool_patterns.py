"""Tool-name patterns (SPEC S5.2) as agent.toml writes them: how one matches a tool, and
why one can never match. Apart from `sandboxes.visibility` (which imports the catalogue of
every tool's parameters) so that reading a config file does not build the catalogue."""

from __future__ import annotations

import re

SERVER_NAME = "corral"
OWN_PREFIX = f"mcp__{SERVER_NAME}__"


_NAME_CHARS = re.compile(r"[a-z0-9_]*")


def pattern_matches(pattern: str, tool: str) -> bool:
    """S5.2 matching: an exact name, or a trailing `*` as a prefix match, against the tool's
    own name or its qualified name `mcp__corral__<tool>`.

    `execute_program`, `mcp__corral__execute_program`, `*`, `mcp__*`, `mcp__corral*`,
    `mcp__corral__*`, `mcp__corral__computer_*` and `computer_*` all work. A `*` anywhere
    but the end is a literal character (and so a config error: see `pattern_problem`).
    `mcp__<other>__...` never matches a corral tool.
    """
    pattern = pattern.strip()
    # A pattern that starts with `mcp__` is read against the qualified name, any other
    # against the tool's own name.
    name = OWN_PREFIX + tool if pattern.startswith("mcp__") else tool
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` can never match a corral tool (whose names are lower-case letters,
    digits and `_`), or None when it can. A pattern that matches nothing would make a
    deny list hide nothing, so config refuses it."""
    if pattern != pattern.strip() or not pattern:
        return "must not be empty or have spaces around it"
    body, star = (pattern[:-1], True) if pattern.endswith("*") else (pattern, False)
    if "*" in body:
        return "a '*' only works at the end of a pattern"
    if star and body.startswith("mcp__") and OWN_PREFIX.startswith(body):
        return None  # `*`, `mcp__*`, `mcp__corral*`, `mcp__corral__*`
    bare = body.removeprefix(OWN_PREFIX)
    if body.startswith("mcp__") and not body.startswith(OWN_PREFIX):
        return f"names another MCP server; corral's tools are {OWN_PREFIX}<tool> or <tool>"
    if bare != bare.lower():
        return "tool names are lower case"
    if not _NAME_CHARS.fullmatch(bare) or (not star and not bare):
        return "a tool name is lower-case letters, digits and '_' (optionally ending in '*')"
    return None
