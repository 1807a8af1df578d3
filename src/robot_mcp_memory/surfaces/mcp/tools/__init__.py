"""MCP tools, one module per domain. Each tool is thin: principal → one service call → a model."""
