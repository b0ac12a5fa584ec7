"""The MCP server (tool catalogue, visibility gate). Filled in by a later issue."""
