"""A throwaway PostgreSQL cluster for the tests: `initdb` in a temporary directory, started on a free
loopback port, stopped (and its directory removed) when the session ends — also when it fails.

Invariants:

- the cluster is the image's own PostgreSQL (``/usr/lib/postgresql/<n>/bin``); nothing is mocked,
  and a missing server is an error naming the remedy (`scripts/check` installs ``postgresql``);
- it listens on 127.0.0.1 only, with ``trust`` authentication for the ``postgres`` role: it holds
  nothing but test data and lives as long as the session;
- when we run as root the server runs as the ``postgres`` user (PostgreSQL refuses root);
- durability is switched off (``fsync``, ``synchronous_commit``, ``full_page_writes``): a crash loses
  a throwaway cluster, never a result.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

#: Where Debian's packages put the server binaries, one folder per major version.
BIN_GLOB = "/usr/lib/postgresql/*/bin/initdb"
INSTALL_HINT = (
    "PostgreSQL's server binaries are missing (looked for /usr/lib/postgresql/*/bin/initdb): "
    "`apt-get update && apt-get install -y postgresql` (scripts/check does this when it runs as root)"
)


class ClusterUnavailable(RuntimeError):
    """The cluster could not be created or started; the message says why and what to do."""


def find_bin() -> Path:
    """The newest installed major version's bin folder, or `ClusterUnavailable`."""
    found = sorted(glob.glob(BIN_GLOB), key=lambda p: int(Path(p).parent.parent.name or 0))
    if not found:
        raise ClusterUnavailable(INSTALL_HINT)
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    bin: Path
    root: Path
    port: int = 0
    user: str | None = None
    _started: bool = field(default=False, repr=False)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str) -> str:
        """A fresh, empty UTF8 database named `prefix` and a random suffix (from ``template0``): its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8'")
        return self.url(name)

    @contextlib.contextmanager
    def database(self, prefix: str) -> Iterator[str]:
        """`new_database`, dropped on leaving (its open connections cut)."""
        url = self.new_database(prefix)
        try:
            yield url
        finally:
            with psycopg.connect(self.url(), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[Cluster]:
        """A new cluster, started, and stopped and removed on leaving (a bench's whole run)."""
        cluster = cls.create()
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = [str(a) for a in args]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)

    @classmethod
    def create(cls) -> Cluster:
        """initdb a new cluster (not started)."""
        bin_dir = find_bin()
        root = Path(tempfile.mkdtemp(prefix="robot-mcp-memory-pg-"))
        user = None
        if os.geteuid() == 0:
            user = "postgres"
            try:
                entry = pwd.getpwnam(user)
            except KeyError as exc:
                shutil.rmtree(root, ignore_errors=True)
                raise ClusterUnavailable(f"no 'postgres' user to run the server as; {INSTALL_HINT}") from exc
            os.chown(root, entry.pw_uid, entry.pw_gid)
        cluster = cls(bin=bin_dir, root=root, user=user)
        done = cluster._run(
            str(bin_dir / "initdb"),
            "-D",
            str(cluster.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        if done.returncode != 0:
            cluster.remove()
            raise ClusterUnavailable(f"initdb failed ({done.returncode}): {done.stderr.strip()[-800:]}")
        return cluster

    def start(self, attempts: int = 3) -> None:
        """Start on a free loopback port (another process may take the port between the look and
        the bind: then another port is tried, `attempts` in all)."""
        problem = ""
        for _ in range(attempts):
            self.port = free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                "-c max_connections=100 -c shared_buffers=32MB"
            )
            done = self._run(
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-w",
                "-t",
                "90",
                "-o",
                options,
                "start",
            )
            if done.returncode == 0:
                self._started = True
                atexit.register(self.stop)  # a session that dies without teardown still stops it
                return
            problem = done.stderr.strip() or done.stdout.strip()
            if self.log.exists():
                problem += "\n" + self.log.read_text(errors="replace")[-800:]
        raise ClusterUnavailable(f"PostgreSQL did not start on 127.0.0.1 after {attempts} tries: {problem[-1200:]}")

    def stop(self) -> None:
        if self._started:
            self._started = False
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop")
        self.remove()

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
