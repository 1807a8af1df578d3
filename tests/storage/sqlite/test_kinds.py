"""Declared kinds, FTS shadow tables and the prune chokepoint (spec §4 "Kinds and retention")."""

from __future__ import annotations

import calendar
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from robot_mcp_memory.storage.sqlite import Kind, Retention, Schema, Table, fts5_table
from robot_mcp_memory.storage.sqlite import index_db as db

NOW = 1_800_000_000.0  # a fixed "now" for retention: no wall clock in these tests
DAY = 86_400.0

DOCS = Table("docs", Kind.DEFINITION, ("CREATE TABLE docs (id INTEGER PRIMARY KEY, at REAL NOT NULL)",))
DOCS_FTS = fts5_table("docs_fts", source="docs", columns="body")
FACTS = Table("facts", Kind.BELIEF, ("CREATE TABLE facts (id INTEGER PRIMARY KEY, at REAL NOT NULL)",))
EVENTS = Table(
    "events",
    Kind.RECORD,
    ("CREATE TABLE events (id INTEGER PRIMARY KEY, at REAL NOT NULL)",),
    retention=Retention("at", max_age_s=7 * DAY),
)
SAMPLES = Table(
    "samples",
    Kind.RECORD,
    ("CREATE TABLE samples (id INTEGER PRIMARY KEY, at TEXT NOT NULL)",),
    retention=Retention("at", max_rows=3),
)
STAMPED = Table(
    "stamped",
    Kind.RECORD,
    ("CREATE TABLE stamped (id INTEGER PRIMARY KEY, at TEXT NOT NULL)",),
    retention=Retention("at", max_age_s=7 * DAY),
)
KEPT = Table("kept", Kind.RECORD, ("CREATE TABLE kept (id INTEGER PRIMARY KEY, at REAL NOT NULL)",))
SCHEMA = Schema((DOCS, DOCS_FTS, FACTS, EVENTS, SAMPLES, STAMPED, KEPT))


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    for t in SCHEMA.tables:
        for stmt in t.ddl:
            c.execute(stmt)
    c.execute("CREATE TABLE stray (id INTEGER PRIMARY KEY, at REAL NOT NULL)")
    yield c
    c.close()


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def _count(conn: sqlite3.Connection, table: str) -> int:
    n: int = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608 - test's own table names
    return n


def _ages(days_old: list[float]) -> list[tuple[float]]:
    return [(NOW - d * DAY,) for d in days_old]


# ---------------------------------------------------------------------------- index.db is fully declared
def test_every_table_in_a_freshly_opened_index_db_has_a_declared_kind(tmp_path: Path) -> None:
    store = db.open_index(tmp_path / "index.db")
    try:
        names = store.read_blocking(_tables)
        assert store.report is not None
        assert store.report.undeclared == []
    finally:
        store.close()
    schema = db.schema()
    assert names, "the fresh file has tables"
    assert schema.undeclared(names) == [], "declare a Kind for every table in db.py"
    for name in names:
        assert schema.kind_of(name) is not None or name in schema.not_ours()


def test_a_table_without_a_declared_kind_is_reported_as_undeclared(conn: sqlite3.Connection) -> None:
    assert SCHEMA.undeclared(_tables(conn)) == ["stray"]


def test_fts_shadow_tables_are_derived_from_the_declaration_and_match_what_sqlite_created(tmp_path: Path) -> None:
    store = db.open_index(tmp_path / "index.db")
    try:
        names = set(store.read_blocking(_tables))
    finally:
        store.close()
    schema = db.schema()
    fts_indexes = [t for t in schema.tables if t.kind is Kind.DERIVED and t.shadow_suffixes]
    assert "processes_fts" in [t.name for t in fts_indexes]
    for t in fts_indexes:
        assert t.source is not None
        assert schema.kind_of(t.source) is not None, f"{t.name} projects a declared table"
    created_by_sqlite = {n for n in names for t in fts_indexes if n.startswith(f"{t.name}_")}
    assert created_by_sqlite == set(schema.not_ours())
    assert {f"processes_fts_{s}" for s in ("data", "idx", "content", "docsize", "config")} <= schema.not_ours()


def test_not_ours_covers_the_shadow_tables_of_every_derived_index(conn: sqlite3.Connection) -> None:
    shadows = {n for n in _tables(conn) if n.startswith("docs_fts_")}
    assert shadows == set(SCHEMA.not_ours())


# ---------------------------------------------------------------------------- declarations
def test_only_a_record_may_declare_retention() -> None:
    with pytest.raises(ValueError, match="retention"):
        Table("t", Kind.DEFINITION, (), retention=Retention("at", max_rows=1))


def test_a_table_cannot_be_declared_twice() -> None:
    with pytest.raises(ValueError, match="twice"):
        Schema((DOCS, DOCS))


def test_the_sweep_list_holds_only_records_with_a_retention() -> None:
    assert [t.name for t in SCHEMA.pruned] == ["events", "samples", "stamped"]


# ---------------------------------------------------------------------------- the prune chokepoint
@pytest.mark.parametrize("table", ["docs", "docs_fts", "facts", "stray", "docs_fts_data", "missing"])
def test_prune_refuses_a_non_record_table_without_deleting_any_row_first(conn: sqlite3.Connection, table: str) -> None:
    conn.executemany("INSERT INTO docs(at) VALUES (?)", _ages([400, 300]))
    conn.executemany("INSERT INTO docs_fts(body) VALUES (?)", [("old",), ("older",)])
    conn.executemany("INSERT INTO facts(at) VALUES (?)", _ages([400, 300]))
    conn.executemany("INSERT INTO stray(at) VALUES (?)", _ages([400, 300]))
    watched = ["docs", "docs_fts", "facts", "stray"]
    before = {t: _count(conn, t) for t in watched}
    statements: list[str] = []
    conn.set_trace_callback(statements.append)

    with pytest.raises(PermissionError):
        SCHEMA.prune(conn, table, now=NOW)

    conn.set_trace_callback(None)
    assert statements == [], "the refusal came before any statement ran"
    assert {t: _count(conn, t) for t in watched} == before


def test_a_record_prunes_rows_older_than_its_max_age(conn: sqlite3.Connection) -> None:
    conn.executemany("INSERT INTO events(at) VALUES (?)", _ages([30, 8, 6, 0]))

    deleted = SCHEMA.prune(conn, "events", now=NOW)

    assert deleted == 2
    ages = sorted((NOW - at) / DAY for (at,) in conn.execute("SELECT at FROM events"))
    assert ages == [0, 6]


def test_a_record_with_iso_text_timestamps_prunes_by_age(conn: sqlite3.Connection) -> None:
    # The store writes timestamps as UTC ISO text; a number/text comparison would never age them out.
    conn.executemany(
        "INSERT INTO stamped(at) VALUES (?)",
        [("2026-12-01T00:00:00Z",), ("2027-01-07T00:00:00Z",), ("2027-01-13T00:00:00Z",)],
    )
    now = float(calendar.timegm((2027, 1, 15, 0, 0, 0)))

    deleted = SCHEMA.prune(conn, "stamped", now=now)

    assert deleted == 2
    assert [r[0] for r in conn.execute("SELECT at FROM stamped")] == ["2027-01-13T00:00:00Z"]


def test_a_record_prunes_beyond_its_newest_max_rows(conn: sqlite3.Connection) -> None:
    stamps = [f"2026-06-{d:02d}T00:00:00Z" for d in (3, 1, 5, 2, 4)]
    conn.executemany("INSERT INTO samples(at) VALUES (?)", [(s,) for s in stamps])

    deleted = SCHEMA.prune(conn, "samples", now=NOW)

    assert deleted == 2
    assert sorted(r[0] for r in conn.execute("SELECT at FROM samples")) == [
        "2026-06-03T00:00:00Z",
        "2026-06-04T00:00:00Z",
        "2026-06-05T00:00:00Z",
    ]


def test_a_record_without_retention_is_left_alone(conn: sqlite3.Connection) -> None:
    conn.executemany("INSERT INTO kept(at) VALUES (?)", _ages([999, 1]))
    assert SCHEMA.prune(conn, "kept", now=NOW) == 0
    assert _count(conn, "kept") == 2
