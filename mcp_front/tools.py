"""A catalogue entry as MCP lists it (tools/list)."""

from __future__ import annotations

import mcp_types as types

from sandboxes.catalogue import NETWORK_EGRESS, ToolSpec

ACTION_CLASSES_META = "corral/actionClasses"


def tool(spec: ToolSpec) -> types.Tool:
    """The tool as listed: its action classes (SPEC S4.3) in `_meta` under
    `corral/actionClasses`, and summed up in the standard annotations."""
    read_only = not spec.action_classes
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.input_schema(),
        output_schema=spec.output_schema(),
        annotations=types.ToolAnnotations(
            read_only_hint=read_only,
            destructive_hint=spec.name == "rig_close" if not read_only else None,
            open_world_hint=NETWORK_EGRESS in spec.action_classes,
        ),
        _meta={ACTION_CLASSES_META: list(spec.action_classes)},
    )
