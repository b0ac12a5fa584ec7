"""Tool families: one module per family, each a handler per tool name."""
