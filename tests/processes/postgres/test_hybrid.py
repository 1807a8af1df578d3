"""Hybrid `find` on PostgreSQL: the same answers as SQLite's on the same documents and embedder,
vectors that replicas see from each other through the feed, and the backfill of rows saved
while the embedder was off."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from functools import partial

import psycopg
import pytest

from robot_mcp_memory.processes import ranking
from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.ports import Hit
from robot_mcp_memory.processes.postgres import store as pg
from robot_mcp_memory.processes.postgres.store import DOMAIN, VECTOR_SOURCE, PostgresProcesses, Snapshot, missing_rows
from robot_mcp_memory.processes.sqlite.store import ProcessStore
from robot_mcp_memory.search.embedders import HashingEmbedder
from robot_mcp_memory.search.postgres import vectorstore
from robot_mcp_memory.search.query import Query
from robot_mcp_memory.search.resilient import ResilientEmbedder
from robot_mcp_memory.search.vectors import Vector
from robot_mcp_memory.storage.postgres import Connection, PostgresStore
from robot_mcp_memory.storage.sqlite import index_db
from tests.processes.postgres.test_parity import QUERIES, corpus

pytestmark = pytest.mark.postgres

MAILROOM = ProcessDoc(
    id="fetch-package-mailroom",
    title="Fetch the package from the mailroom",
    task_pattern="deliver parcels",
    body="## Steps\n1. go to the mailroom\n",
    robot="shared",
)
#: Misspelt past the keyword index (no token matches) but close in character trigrams.
BY_VECTOR_ONLY = "mailroomz packagez"


def embedder(dim: int = 256) -> ResilientEmbedder:
    emb = ResilientEmbedder(HashingEmbedder(dim), background=False)
    emb.start()
    return emb


# ---------------------------------------------------------------------------- parity with SQLite
@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Iterator[tuple[ProcessStore, PostgresProcesses]]:
    """The parity corpus saved through each repository's own `save` (which embeds), once."""
    docs = corpus()
    lite_db = index_db.open_index(tmp_path_factory.mktemp("hybrid") / "index.db")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    pg_db = PostgresStore.open(pg_url, schema=schema, max_size=2)
    lite, pg = ProcessStore(lite_db, embedder()), PostgresProcesses(pg_db, embedder())

    async def fill() -> None:
        for d in docs:
            await lite.save(d)
            await pg.save(d)

    try:
        asyncio.run(fill())
        yield lite, pg
    finally:
        lite.close()
        pg.close()
        lite_db.close()
        pg_db.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def assert_same_hits(got: list[Hit], want: list[Hit]) -> None:
    assert [h.doc.id for h in got] == [h.doc.id for h in want]
    for g, w in zip(got, want, strict=True):
        assert g.score == pytest.approx(w.score, rel=1e-9, abs=1e-12)
        assert g.relevance == pytest.approx(w.relevance, rel=1e-9, abs=1e-12)
        assert g.fleet == w.fleet


@pytest.mark.parametrize("tenant", [None, "group:g1"])
@pytest.mark.parametrize("visible", [None, frozenset({"rap-1", "shared"})])
@pytest.mark.parametrize("query", [*QUERIES, BY_VECTOR_ONLY, "fetch the parcle from the mial room"])
async def test_hybrid_find_answers_alike_on_both_backends(
    both: tuple[ProcessStore, PostgresProcesses], query: str, visible: frozenset[str] | None, tenant: str | None
) -> None:
    lite, pg = both
    q = Query.parse(query)
    for k in (1, 3, 10):
        want, want_mode = await lite.find_hybrid(q, k, visible, tenant)
        got, got_mode = await pg.find_hybrid(q, k, visible, tenant)
        assert got_mode == want_mode
        assert_same_hits(got, want)
    assert got_mode == ("hybrid" if q.searchable else "keyword")


async def test_both_backends_store_the_same_vectors(both: tuple[ProcessStore, PostgresProcesses]) -> None:
    lite, pg = both
    assert await pg.vector_status() == await lite.vector_status()
    assert (await pg.vector_status())["stored"] == {"hashing-v1-256": len(corpus())}


# ---------------------------------------------------------------------------- replicas
@pytest.fixture
def replicas(pg_store: PostgresStore, pg_url: str) -> Iterator[tuple[PostgresProcesses, PostgresProcesses]]:
    """Two server processes' repositories on one schema: each its own pool, cache and embedder."""
    other = PostgresStore.open(pg_url, schema=pg_store.schema, max_size=2)
    one, two = PostgresProcesses(pg_store, embedder()), PostgresProcesses(other, embedder())
    try:
        yield one, two
    finally:
        one.close()
        two.close()
        other.close()


async def _warm(*repos: PostgresProcesses) -> None:
    """Each repository's cache loaded (a first hybrid find), so what follows goes through the feed."""
    for repo in repos:
        assert (await repo.find_hybrid(Query.parse("mop the hall"), 3))[1] == "hybrid"


async def test_a_vector_saved_on_one_replica_is_found_by_the_other_s_next_hybrid_find(
    replicas: tuple[PostgresProcesses, PostgresProcesses],
) -> None:
    one, two = replicas
    await one.save(ProcessDoc(id="mop-hall", title="Mop the hall", body="## Steps\n1. mop\n", robot="shared"))
    await _warm(one, two)
    loads = two.vectors.loads
    await one.save(MAILROOM)
    q = Query.parse(BY_VECTOR_ONLY)
    assert await two.find(q, 3) == [], "no keyword matches the misspelt query"
    hits, mode = await two.find_hybrid(q, 3)
    assert mode == "hybrid"
    assert [h.doc.id for h in hits] == ["fetch-package-mailroom"]
    assert two.vectors.loads == loads, "the other replica's cache took the new vector from the feed"
    assert two.vectors.applied >= 1


async def test_a_delete_on_one_replica_leaves_the_other_s_hybrid_answer(
    replicas: tuple[PostgresProcesses, PostgresProcesses],
) -> None:
    one, two = replicas
    await one.save(MAILROOM)
    await one.save(ProcessDoc(id="mop-hall", title="Mop the hall", body="## Steps\n1. mop\n", robot="shared"))
    await _warm(one, two)
    q = Query.parse(BY_VECTOR_ONLY)
    assert [h.doc.id for h in (await two.find_hybrid(q, 3))[0]] == ["fetch-package-mailroom"]
    assert await one.delete("fetch-package-mailroom")
    hits, mode = await two.find_hybrid(q, 3)
    assert (hits, mode) == ([], "hybrid")
    emb = two.embedder
    assert emb is not None
    qvec = emb.embed([BY_VECTOR_ONLY])
    assert qvec is not None
    nearest = two.db.read_blocking(lambda c: Snapshot(c, two.vectors).vector_top(qvec[0], "hashing-v1-256", 5, None))
    assert nearest is not None
    assert [ref for ref, _ in nearest] == ["mop-hall"], "the deleted vector left the other replica's index"
    assert (await two.vector_status())["stored"] == {"hashing-v1-256": 1}


async def test_an_edit_on_one_replica_moves_the_vector_the_other_ranks_by(
    replicas: tuple[PostgresProcesses, PostgresProcesses],
) -> None:
    one, two = replicas
    await one.save(MAILROOM.model_copy(update={"title": "Water the plants", "task_pattern": "garden"}))
    await one.save(ProcessDoc(id="mop-hall", title="Mop the hall", body="## Steps\n1. mop\n", robot="shared"))
    await _warm(one, two)
    q = Query.parse(BY_VECTOR_ONLY)
    assert "fetch-package-mailroom" not in [h.doc.id for h in (await two.find_hybrid(q, 3))[0]]
    await one.save(MAILROOM)  # the same id, the mailroom text now
    assert [h.doc.id for h in (await two.find_hybrid(q, 3))[0]] == ["fetch-package-mailroom"]


async def test_saves_from_two_replicas_at_once_all_reach_both_caches(
    replicas: tuple[PostgresProcesses, PostgresProcesses],
) -> None:
    """Interleaved vector writes from both replicas while both keep finding: afterwards each
    replica's index holds exactly the stored vectors (none skipped by a feed read in between)."""
    one, two = replicas
    await one.save(ProcessDoc(id="mop-hall", title="Mop the hall", body="## Steps\n1. mop\n", robot="shared"))
    await _warm(one, two)
    q = Query.parse("mop hall")

    def doc(i: int) -> ProcessDoc:
        return ProcessDoc(id=f"mop-{i:02d}", title=f"Mop hall {i}", body="## Steps\n1. mop\n", robot=f"rap-{i % 3}")

    await asyncio.gather(
        *(repo.save(doc(i)) for i in range(24) for repo in [(one, two)[i % 2]]),
        *(repo.find_hybrid(q, 3) for _ in range(6) for repo in (one, two)),
    )
    for repo in (one, two):
        index = repo.db.read_blocking(partial(repo.vectors.index, domain=DOMAIN, model_id="hashing-v1-256"))
        assert index is not None
        assert len(index) == 25
    assert (await one.vector_status())["stored"] == {"hashing-v1-256": 25}


async def test_a_find_on_an_older_snapshot_drops_vectors_its_cache_took_from_a_newer_one(
    replicas: tuple[PostgresProcesses, PostgresProcesses],
) -> None:
    """Two finds of one replica: the first's snapshot predates a save another replica made, the
    second applies that save's vector to the shared cache before the first ranks. The first
    answers from its snapshot (the new document is not there) and does not fail."""
    one, two = replicas
    await one.save(ProcessDoc(id="mop-hall", title="Mop the hall", body="## Steps\n1. mop\n", robot="shared"))
    await _warm(one, two)
    emb = two.embedder
    assert emb is not None
    model_id, qvec = emb.embed_query(BY_VECTOR_ONLY) or ("", None)
    assert qvec is not None
    q = Query.parse(BY_VECTOR_ONLY)

    def older(c: Connection) -> list[Hit] | None:
        c.execute("SELECT count(*) FROM processes")  # the snapshot is taken here
        saving = partial(_save_with_vector, schema=one.db.schema, doc=MAILROOM, model_id=model_id, vec=qvec)
        one.db.write_blocking(saving)  # another replica, committed after that snapshot
        newer = two.db.read_blocking(partial(two.vectors.index, domain=DOMAIN, model_id=model_id))
        assert newer is not None
        assert "fetch-package-mailroom" in newer._row
        return ranking.hybrid_search(Snapshot(c, two.vectors), q, qvec, model_id, None, two.fuse, 3)

    hits = await asyncio.to_thread(two.db.read_blocking, older)
    assert hits is not None
    assert "fetch-package-mailroom" not in [h.doc.id for h in hits]
    assert [h.doc.id for h in (await two.find_hybrid(q, 3))[0]] == ["fetch-package-mailroom"]


def _save_with_vector(conn: Connection, schema: str, doc: ProcessDoc, model_id: str, vec: Vector) -> None:
    saved = pg.save_doc(conn, schema, doc, "2026-01-01T00:00:00Z", lambda _o: True)
    pg.saved_vector(conn, saved.doc, (model_id, vec))


# ---------------------------------------------------------------------------- the backfill
async def test_the_backfill_fills_vectors_saved_while_the_embedder_was_off(
    replicas: tuple[PostgresProcesses, PostgresProcesses],
) -> None:
    one, two = replicas
    one.embedder = None  # this replica runs without a model
    for i in range(70):  # more than one backfill batch
        await one.save(ProcessDoc(id=f"p-{i:02d}", title=f"Mop hall {i}", body="## Steps\n1. mop\n", robot="shared"))
    await one.save(MAILROOM)
    status = await two.vector_status()
    assert (status["stored"], status["missing"]) == ({}, 71)
    q = Query.parse(BY_VECTOR_ONLY)
    assert await two.find_hybrid(q, 3) == ([], "keyword"), "no stored vector: keyword mode, said so"
    progress: list[tuple[int, int]] = []
    assert await two.reembed(lambda done, total: progress.append((done, total))) == 71
    assert (progress[0], progress[-1]) == ((0, 71), (71, 71))
    status = await two.vector_status()
    assert (status["stored"], status["missing"]) == ({"hashing-v1-256": 71}, 0)
    hits, mode = await two.find_hybrid(q, 3)
    assert (mode, hits[0].doc.id) == ("hybrid", "fetch-package-mailroom")
    assert await two.reembed() == 0, "nothing left to fill"
    assert await two.reembed(force=True) == 71


async def test_a_save_without_a_vector_kicks_the_background_backfill(
    replicas: tuple[PostgresProcesses, PostgresProcesses],
) -> None:
    one, _ = replicas
    backend = HashingEmbedder()
    flaky = ResilientEmbedder(backend, background=False, clock=lambda: 0.0)
    flaky.start()
    one.embedder = flaky
    failing = backend.embed

    def fail(texts: object) -> object:
        raise RuntimeError("model down")

    backend.embed = fail  # type: ignore[assignment,method-assign]  # the model fails from now on
    await one.save(MAILROOM)
    assert flaky.mode == "unavailable"
    assert (await one.vector_status())["missing"] == 1
    backend.embed = failing  # type: ignore[method-assign]  # it recovers
    flaky.clock = lambda: 1e6  # past the backoff
    assert flaky.embed(["probe"]) is not None
    one.kick_backfill()
    assert one.backfiller.wait_idle(60)
    assert (await one.vector_status())["missing"] == 0


def test_the_backfill_never_stores_a_vector_of_text_the_row_no_longer_has(pg_store: PostgresStore) -> None:
    """A row edited between the backfill's read and its write keeps the vector its own save
    wrote (here none: the embedder is off), not one of the text it had before."""
    repo = PostgresProcesses(pg_store)
    asyncio.run(repo.save(MAILROOM))
    [row] = pg_store.read_blocking(lambda c: missing_rows(c, "hashing-v1-256", "", 10))
    asyncio.run(repo.save(MAILROOM.model_copy(update={"title": "Water the plants"})))
    vec = embedder().embed([row[2]])
    assert vec is not None
    items = [(row[0], row[2], vec[0])]
    written = pg_store.write_blocking(lambda c: vectorstore.store_batch(c, VECTOR_SOURCE, "hashing-v1-256", items))
    assert written == 0
    assert pg_store.read_blocking(lambda c: vectorstore.counts(c, DOMAIN)) == {}
    [(ref, _p, text)] = pg_store.read_blocking(lambda c: missing_rows(c, "hashing-v1-256", "", 10))
    fresh = embedder().embed([text])
    assert fresh is not None
    again = [(ref, text, fresh[0])]
    assert pg_store.write_blocking(lambda c: vectorstore.store_batch(c, VECTOR_SOURCE, "hashing-v1-256", again)) == 1


def test_the_vectors_tables_are_migrated_once_whichever_adapter_asks(pg_store: PostgresStore) -> None:
    PostgresProcesses(pg_store)
    again = vectorstore.migrate(pg_store)
    assert (again.from_version, again.to_version) == (1, 1)
    assert len(vectorstore.MIGRATIONS) == 1
