"""robot-mcp-memory: the memory a robot fleet shares, served over MCP."""

__version__ = "0.1.0"
