"""The tests' throwaway PostgreSQL cluster: it says what is missing, and leaves nothing behind."""

from __future__ import annotations

import socket

import psycopg
import pytest

from tests import pgcluster
from tests.pgcluster import Cluster, ClusterUnavailable


def test_missing_server_binaries_are_an_error_that_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgcluster, "BIN_GLOB", "/nonexistent/postgresql/*/bin/initdb")
    with pytest.raises(ClusterUnavailable, match="apt-get"):
        pgcluster.find_bin()


@pytest.mark.e2e
def test_a_stopped_cluster_leaves_no_server_and_no_directory() -> None:
    cluster = Cluster.create()
    try:
        cluster.start()
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            assert conn.execute("SHOW fsync").fetchone() == ("off",)
            assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    finally:
        cluster.stop()
    assert not cluster.root.exists()
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", cluster.port)) != 0, "nothing listens on its port any more"
