"""Services: the business rules, shared by every surface (MCP tools, REST, CLI, Python API).

Each method takes the caller's `Principal` and raises from `errors`; adapters map those once.
"""
