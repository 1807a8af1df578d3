"""REST handlers, one module per domain; each `register(api, ctx)` declares its endpoints."""
