"""What every REST handler module gets: the `Memory`, the token check and the browser sessions."""

from __future__ import annotations

from dataclasses import dataclass

from robot_mcp_memory.app import Memory
from robot_mcp_memory.tokens import TokenAuth
from robot_mcp_memory.web.sessions import SessionStore


@dataclass(frozen=True)
class WebContext:
    memory: Memory
    auth: TokenAuth
    sessions: SessionStore
