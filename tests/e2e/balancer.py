"""A real HAProxy running the shipped ``deploy/haproxy.cfg``, for the fleet test.

Invariants:

- the file HAProxy runs is the repository's own, unmodified: only the environment it reads
  (``LISTEN``, ``REPLICA1``…``REPLICA3``) differs from a deployment, so the tested config is the
  shipped one;
- HAProxy is Debian's package; a missing binary is an error naming the remedy (`scripts/check`
  installs ``haproxy``), never a skip — as for PostgreSQL (tests/pgcluster.py);
- it runs in the foreground (``-db``) as a child of the test, its output in a file of the test's own,
  and is stopped by SIGTERM → bounded wait → SIGKILL.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc

from tests.e2e.harness import HOST, POLL_INTERVAL_S, STOP_GRACE_S, child_env, free_port

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"
INSTALL_HINT = (
    "HAProxy is missing (looked for `haproxy` on PATH and /usr/sbin/haproxy): "
    "`apt-get update && apt-get install -y haproxy` (scripts/check does this when it runs as root)"
)
#: A bound on waiting for HAProxy to listen, not a speed figure (it usually takes milliseconds).
START_DEADLINE_S = 30.0


class BalancerUnavailable(RuntimeError):
    """HAProxy is not installed, or did not start; the message says why and what to do."""


def find_haproxy() -> str:
    found = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if found is None:
        raise BalancerUnavailable(INSTALL_HINT)
    return found


@dataclass
class Balancer:
    """HAProxy on ``127.0.0.1:port`` in front of `replicas` (each a loopback port)."""

    replicas: list[int]
    log_path: Path
    port: int = field(default_factory=free_port)
    process: anyio.abc.Process | None = None

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def env(self) -> dict[str, str]:
        assert len(self.replicas) == 3, "deploy/haproxy.cfg names three replicas"
        env = {"LISTEN": f"{HOST}:{self.port}"}
        env.update({f"REPLICA{i}": f"{HOST}:{port}" for i, port in enumerate(self.replicas, start=1)})
        return env

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    async def start(self) -> None:
        assert self.process is None, "already running"
        binary = find_haproxy()
        with self.log_path.open("wb") as log:
            self.process = await anyio.open_process(
                [binary, "-db", "-f", str(CONFIG)],
                env=child_env(**self.env()),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        with anyio.move_on_after(START_DEADLINE_S):
            while self.process.returncode is None:
                if _accepts(self.port):
                    return
                await anyio.sleep(POLL_INTERVAL_S)
        code = self.process.returncode
        await self.stop()
        raise BalancerUnavailable(f"HAProxy did not listen on {HOST}:{self.port} (exit {code}):\n{self.output()}")

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.returncode is None:
            process.terminate()
            with anyio.move_on_after(STOP_GRACE_S):
                await process.wait()
            if process.returncode is None:
                process.kill()
        with anyio.fail_after(STOP_GRACE_S):
            await process.wait()
        await process.aclose()


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((HOST, port)) == 0
