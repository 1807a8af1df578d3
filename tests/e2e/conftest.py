"""Fixtures for the end-to-end tests: the real server process, and a client nobody here wrote."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.e2e.harness import Inspector, ServerProcess, child_env, running


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    """The real server (SSE + Streamable HTTP + /healthz on one loopback port) on a fresh data dir."""
    async with running(tmp_path) as proc:
        yield proc


def _npm_cache(npx: str) -> str:
    """npm's cache as configured for the user running the tests (HOME is about to change)."""
    npm = Path(npx).with_name("npm")
    if npm.exists():
        done = subprocess.run([str(npm), "config", "get", "cache"], capture_output=True, text=True, timeout=60)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return str(Path.home() / ".npm")


@pytest.fixture(scope="session")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Inspector:
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip(
            "npx is missing, so the MCP Inspector CLI cannot run: install Node.js 22.19 or newer (npm brings npx)"
        )
    env = child_env(
        HOME=str(tmp_path_factory.mktemp("inspector-home")),
        NPM_CONFIG_CACHE=_npm_cache(npx),
        NPM_CONFIG_UPDATE_NOTIFIER="false",
        NPM_CONFIG_FUND="false",
        NPM_CONFIG_AUDIT="false",
        NPM_CONFIG_LOGLEVEL="error",
        NO_COLOR="1",
    )
    return Inspector(npx=npx, env=env)
