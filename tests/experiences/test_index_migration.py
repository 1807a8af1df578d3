"""Migration 6: a file from before it loses the unused tag-name index and gets the partial session
index, keeping every memory; session lookups still use the index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.storage.sqlite import index_db as db


def _indexes(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0]: r[1] for r in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'")}
    finally:
        conn.close()


def _stored(data: Path, public_id: int) -> int:
    """The stored id of the memory of `data`'s index.db shown as `public_id`: what it is shown by
    once `_back_to` made the file older than its public ids."""
    conn = sqlite3.connect(data / "index.db")
    try:
        row = conn.execute("SELECT id FROM memory_public WHERE public_id = ?", (public_id,)).fetchone()
    finally:
        conn.close()
    assert row is not None
    return int(row[0])


def _back_to(path: Path, version: int, *statements: str) -> None:
    """Turn a closed `index.db` back into what `version` had: its public ids gone (migration 26
    brought them: its memories are shown by their stored ids), `statements`, then its version number."""
    conn = sqlite3.connect(path)
    try:
        if version < 26:
            conn.execute("DROP TABLE memory_public")
        for sql in statements:
            conn.execute(sql)
        conn.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        conn.commit()
    finally:
        conn.close()


def test_a_version_5_file_is_migrated_and_keeps_its_memories(tmp_path: Path) -> None:
    mem = RobotMemory(tmp_path, robot_id="rap-1")
    sid = mem.start_session(context={"task": "sorting"})
    mem.learn("the blue bin jams at 30 N", {"params": {"force": 30}}, session_id=sid)
    mem.learn("the red bin opens at 12 N", {"params": {"force": 12}})
    mem.close()
    path = tmp_path / "index.db"
    _back_to(
        path,
        5,
        "DROP INDEX idx_memories_session",
        "CREATE INDEX idx_memories_session ON memories(session_id)",
        "CREATE INDEX idx_memory_tags_tag ON memory_tags(tag)",
    )

    mem = RobotMemory(tmp_path, robot_id="rap-1")
    try:
        assert len(mem.recall("bin", n=5)) == 2
    finally:
        mem.close()
    indexes = _indexes(path)
    assert "idx_memory_tags_tag" not in indexes
    assert "WHERE session_id IS NOT NULL" in indexes["idx_memories_session"]
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()[0]
        assert int(version) == len(db.MIGRATIONS)
        plan = " ".join(
            str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN SELECT id FROM memories WHERE session_id = ?", (sid,))
        )
        assert "idx_memories_session" in plan
    finally:
        conn.close()


def test_a_version_6_file_gets_the_digests_dedup_computes_now(tmp_path: Path) -> None:
    """Migration 7: a memory stored under the old digest (numbers after a letter did not count)
    is still found as the duplicate of the same experience learned again."""
    mem = RobotMemory(tmp_path, robot_id="rap-1")
    first = _stored(tmp_path, mem.learn("use gripper mode M12 for the wet mug", {"task": {"success": 1}})["memory_id"])
    mem.close()
    _back_to(tmp_path / "index.db", 6, "UPDATE memories SET facts_hash = 'digest-from-before'")

    mem = RobotMemory(tmp_path, robot_id="rap-1")
    try:
        again = mem.learn("use gripper mode M12 for the wet mug", {"task": {"success": 1}})
        assert again["status"] == "duplicate"
        assert again["existing_id"] == first
        assert mem.learn("use gripper mode M15 for the wet mug", {"task": {"success": 1}})["status"] == "created"
    finally:
        mem.close()


def test_a_version_8_file_gets_the_digests_with_units_and_the_whole_context(tmp_path: Path) -> None:
    """Migration 9: digests computed before units, the note and the other context keys counted are
    recomputed, so the same experience learned again is still found as the duplicate."""
    mem = RobotMemory(tmp_path, robot_id="rap-1")
    first = _stored(tmp_path, mem.learn("wait 5 seconds before grasping the cup", "attempt succeeded")["memory_id"])
    mem.close()
    _back_to(tmp_path / "index.db", 8, "UPDATE memories SET facts_hash = 'digest-from-before'")

    mem = RobotMemory(tmp_path, robot_id="rap-1")
    try:
        again = mem.learn("wait 5 seconds before grasping the cup", "attempt succeeded")
        assert again["status"] == "duplicate"
        assert again["existing_id"] == first
        assert mem.learn("wait 5 minutes before grasping the cup", "attempt succeeded")["status"] == "created"
        assert mem.learn("wait 5 seconds before grasping the cup", "attempt failed")["status"] == "created"
    finally:
        mem.close()


def test_a_version_10_file_gets_digests_where_a_plain_note_decides_nothing(tmp_path: Path) -> None:
    """Version 10 wrote a note without numbers or negation into the digest; migration 11 writes
    today's, so the same insight learned again is found as the duplicate it is."""
    from dataclasses import replace

    from robot_mcp_memory.experiences import dedup

    text = "the gripper slips on wet mugs"
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        first = _stored(tmp_path, mem.learn(text, "seen in lab")["memory_id"])
    old = dedup.facts_hash(replace(dedup.facts_of(text, {"note": "seen in lab"}), note=((), False)))
    _back_to(tmp_path / "index.db", 10, f"UPDATE memories SET facts_hash = '{old}' WHERE id = {first}")  # noqa: S608
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        again = mem.learn(text, "seen in lab")
    assert (again["status"], again["existing_id"]) == ("duplicate", first)


def test_a_version_11_file_gets_digests_where_the_task_and_robot_decide(tmp_path: Path) -> None:
    """Version 11 left the task's name, reward and steps and the robot out of the digest;
    migration 12 writes today's, so the same experience learned again (same task, same robot)
    is still found as the duplicate, and another robot type's is stored."""
    from robot_mcp_memory.experiences import dedup

    text = "closing the gripper slowly avoids knocking the object over"
    ctx = {"task": {"name": "grasp_mug", "success": True, "reward": 0.95}, "robot": {"type": "ur5e"}}
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        first = _stored(tmp_path, mem.learn(text, ctx)["memory_id"])
    old = dedup.facts_hash(dedup.facts_of(text, {"task": {"success": True}}))  # what version 11 stored
    _back_to(tmp_path / "index.db", 11, f"UPDATE memories SET facts_hash = '{old}' WHERE id = {first}")  # noqa: S608
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        again = mem.learn(text, ctx)
        other = mem.learn(text, {**ctx, "robot": {"type": "panda"}})
    assert (again["status"], again["existing_id"]) == ("duplicate", first)
    assert other["status"] == "created"


def test_a_version_11_file_gets_lexical_keys_and_whole_environments(tmp_path: Path) -> None:
    """Version 11 stored the hash of the normalised text as content_hash and an env cut to 32
    characters in the digest; migration 12 writes the lexical key and today's digest, so a
    rewording in other articles and unit spellings still finds the stored copy."""
    import hashlib

    from robot_mcp_memory.experiences import dedup

    text = "Grip the wet mug by the handle at 12 N"
    ctx = {"env": "warehouse-7/aisle-12/shelf-unit-04/bay-A"}
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        first = _stored(tmp_path, mem.learn(text, ctx)["memory_id"])
    old_hash = hashlib.sha256(dedup.normalise(text).encode()).hexdigest()[:32]  # what version 11 stored
    old_facts = dedup.facts_hash(dedup.facts_of(text, {"env": ctx["env"][:32]}))
    _back_to(
        tmp_path / "index.db",
        11,
        f"UPDATE memories SET content_hash = '{old_hash}', facts_hash = '{old_facts}' WHERE id = {first}",  # noqa: S608
    )
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        again = mem.learn("Please grip a wet mug by the handle at 12N", ctx)
    assert (again["status"], again["existing_id"]) == ("duplicate", first)


def test_a_file_whose_version_a_concurrent_open_rewound_to_4_is_repaired_keeping_its_memories(tmp_path: Path) -> None:
    """Two processes creating one data directory at once could leave a finished file saying
    version 4 (a late one re-ran steps 1-4 over it); every later open failed at step 5 ("duplicate
    column name: fts_rowid"), and the memories were unreachable. Step 5 takes the column as it
    finds it, and the steps after it are re-derivations, so the file opens and is whole again."""
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        mem.learn("the blue bin jams at 30 N", {"params": {"force": 30}})
    path = tmp_path / "index.db"
    _back_to(path, 4)

    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        assert [m["content"] for m in mem.recall("blue bin")] == ["the blue bin jams at 30 N"]
        again = mem.learn("the blue bin jams at 30 N", {"params": {"force": 30}})
        assert again["status"] == "duplicate"
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()[0]
        assert int(version) == len(db.MIGRATIONS)
        health = db.text_index_health(conn)
        assert all(ix.ok for ix in health), health
    finally:
        conn.close()


def test_a_file_from_the_first_experience_release_gets_the_ranking_index(tmp_path: Path) -> None:
    """The first build of migration 4 made no idx_memories_rank and no later step added it: such a
    file ranked keyword recall without it (10-25 % slower at 100,000 memories) for good."""
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        mem.learn("the red bin opens at 12 N", {"params": {"force": 12}})
    path = tmp_path / "index.db"
    _back_to(path, 12, "DROP INDEX idx_memories_rank")

    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        assert [m["content"] for m in mem.recall("red bin")] == ["the red bin opens at 12 N"]
    assert "idx_memories_rank" in _indexes(path)
    store = db.open_index(path)
    try:
        from robot_mcp_memory.experiences.sqlite.storage import ExperienceStore

        assert ExperienceStore(store).covering
    finally:
        store.close()


def test_a_version_13_file_gets_todays_lexical_keys_and_the_bounded_key_index(tmp_path: Path) -> None:
    """Migration 14: keys from 13 dropped numbers and symbols ("> 50 C" was "< 50 C") and kept
    "don't" apart from "do not"; its key index held the key alone, so a lookup walked every row
    sharing it. The keys are recomputed and the index gains robot, collection and digest."""
    from robot_mcp_memory.experiences import dedup

    text = "Don't stop if the temperature > 50 C"
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        first = _stored(tmp_path, mem.learn(text)["memory_id"])
    old_key = dedup.lexical_key(("don", "t", "stop", "if", "temperature", "c"), text)  # what 13 stored
    _back_to(
        tmp_path / "index.db",
        13,
        f"UPDATE memories SET content_hash = '{old_key}' WHERE id = {first}",  # noqa: S608
        "DROP INDEX idx_memories_hash",
        "CREATE INDEX idx_memories_hash ON memories(content_hash)",
        "CREATE INDEX idx_memories_facts ON memories(facts_hash)",
    )
    _finds_the_duplicate_by_one_index(
        tmp_path, first, "Do not stop if the temperature > 50 C", "Don't stop if the temperature < 50 C"
    )


def test_a_version_15_file_gets_one_index_for_the_duplicate_lookups(tmp_path: Path) -> None:
    """Migration 16: the two indexes of version 15 (key first; digest alone) become one (digest,
    robot, collection, key) — a page fewer written per learn — and the lookups still find what
    they found: the lexical duplicate, and no memory with other numbers."""
    first = _learned_then_back_to(
        tmp_path,
        15,
        "DROP INDEX idx_memories_hash",
        "CREATE INDEX idx_memories_hash ON memories(content_hash, robot, collection, facts_hash)",
        "CREATE INDEX idx_memories_facts ON memories(facts_hash)",
    )
    _finds_the_duplicate_by_one_index(
        tmp_path, first, "The gripper slips on the wet mug at 12 N!", "the gripper slips on the wet mug at 15 N"
    )


def _learned_then_back_to(data: Path, version: int, *statements: str) -> int:
    """A store holding one fact (its id returned), turned back into what `version` had."""
    with RobotMemory(data, robot_id="rap-1") as mem:
        first = _stored(data, mem.learn("the gripper slips on the wet mug at 12 N")["memory_id"])
    _back_to(data / "index.db", version, *statements)
    return int(first)


def _finds_the_duplicate_by_one_index(data: Path, first: int, same: str, other: str) -> None:
    """After an upgrade: `same` is found as the duplicate of memory `first`, `other` is stored,
    and the duplicate lookups have their one index (digest, robot, collection, key)."""
    with RobotMemory(data, robot_id="rap-1") as mem:
        again = mem.learn(same)
        new = mem.learn(other)
    assert (again["status"], again["existing_id"]) == ("duplicate", first)
    assert new["status"] == "created"
    indexes = _indexes(data / "index.db")
    assert "(facts_hash, robot, collection, content_hash)" in indexes["idx_memories_hash"]
    assert not {"idx_memories_key", "idx_memories_facts"} & set(indexes)
    # the lookup of a build from before migration 16 names the index and finds its plan there
    conn = sqlite3.connect(data / "index.db")
    try:
        old_lookup = (
            "SELECT m.id, m.content FROM memories m INDEXED BY idx_memories_hash WHERE m.content_hash = ? "
            "AND m.robot = ? AND m.collection = ? AND m.type = ? AND m.status = 'active' AND m.facts_hash = ? "
            "ORDER BY m.id LIMIT ?"
        )
        assert conn.execute(old_lookup, ("k", "rap-1", "default", "fact", "f", 20)).fetchall() == []
    finally:
        conn.close()


def test_a_version_17_file_gets_the_whole_change_log_triggers_and_the_index_name_back(tmp_path: Path) -> None:
    """Migration 18: version 17's trigger logged only updates that left a memory active, and its
    key index had a name no older build's lookup gives. Both are made again; what was stored stays."""
    first = _learned_then_back_to(
        tmp_path,
        17,
        "DROP TRIGGER memories_rank_log",
        "DROP TRIGGER memories_rank_log_insert",
        "DROP TRIGGER memories_rank_log_delete",
        "CREATE TRIGGER memories_rank_log AFTER UPDATE OF collection, robot, status, confidence, source_weight "
        "ON memories WHEN NEW.status = 'active' BEGIN INSERT INTO memory_index_log(doc) VALUES (NEW.id); END",
        "DROP INDEX idx_memories_hash",
        "CREATE INDEX idx_memories_key ON memories(facts_hash, robot, collection, content_hash)",
    )
    _finds_the_duplicate_by_one_index(
        tmp_path, first, "The gripper slips on the wet mug at 12 N!", "the gripper slips on the wet mug at 15 N"
    )
    conn = sqlite3.connect(tmp_path / "index.db")
    try:
        triggers = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall())
        before = conn.execute("SELECT count(*) FROM memory_index_log").fetchone()[0]
        conn.execute("UPDATE memories SET status = 'forgotten' WHERE id = ?", (first,))
        after = conn.execute("SELECT count(*) FROM memory_index_log").fetchone()[0]
    finally:
        conn.close()
    assert set(triggers) == {
        "memories_rank_log",
        "memories_rank_log_insert",
        "memories_rank_log_delete",
        "memories_text_log",  # migration 24
        "processes_index_log_insert",  # migration 25: the process index's log
        "processes_index_log_update",
        "processes_index_log_delete",
    }
    assert after == before + 1  # a memory leaving the active ones is logged now


def test_a_version_19_file_logs_an_update_of_a_context(tmp_path: Path) -> None:
    """Migrations 20 and 21: version 19's trigger did not log an update of a context or of
    updated_at, so a cached set of the memories passing a context_filter (the filter masks, since deleted) could not
    follow one made by hand. The trigger is made again; what was stored stays."""
    first = _learned_then_back_to(
        tmp_path,
        19,
        "DROP TRIGGER memories_rank_log",
        "CREATE TRIGGER memories_rank_log AFTER UPDATE OF id, collection, robot, status, confidence, source_weight "
        "ON memories WHEN NEW.status = 'active' OR OLD.status = 'active' OR NEW.id IS NOT OLD.id "
        "BEGIN INSERT INTO memory_index_log(doc) VALUES (NEW.id); "
        "INSERT INTO memory_index_log(doc) SELECT OLD.id WHERE OLD.id IS NOT NEW.id; END",
    )
    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        assert [m["id"] for m in mem.recall("gripper slips")] == [first]
    conn = sqlite3.connect(tmp_path / "index.db")
    try:
        before = conn.execute("SELECT count(*) FROM memory_index_log").fetchone()[0]
        conn.execute('UPDATE memories SET context = \'{"task": {"name": "dock"}}\' WHERE id = ?', (first,))
        logged = conn.execute("SELECT doc FROM memory_index_log ORDER BY seq DESC LIMIT 1").fetchone()[0]
        after = conn.execute("SELECT count(*) FROM memory_index_log").fetchone()[0]
        conn.execute("UPDATE memories SET updated_at = updated_at - 86400 WHERE id = ?", (first,))  # migration 21
        aged = conn.execute("SELECT count(*) FROM memory_index_log").fetchone()[0]
        conn.execute("UPDATE memories SET status = 'forgotten' WHERE id = ?", (first,))
        conn.commit()
        before_inactive = conn.execute("SELECT count(*) FROM memory_index_log").fetchone()[0]
        conn.execute("UPDATE memories SET context = '{}' WHERE id = ?", (first,))  # not active before or after
        after_inactive = conn.execute("SELECT count(*) FROM memory_index_log").fetchone()[0]
    finally:
        conn.close()
    # a context's change is logged twice: a ranking attribute (migration 20) and a text (migration 24)
    assert (after, logged) == (before + 2, first)
    assert aged == after + 1
    # not active before or after: no ranking attribute changed, but its text did, whose length
    # FTS5's bm25 counts in every memory's score (migration 24)
    assert after_inactive == before_inactive + 1


def _checks_and_temporary_tables(path: Path) -> tuple[str, int]:
    """The definitions of memories and memory_tags, and how many temporary b-trees writing a
    memory and a tag opens (SQLite's ``OpenEphemeral``)."""
    conn = sqlite3.connect(path)
    try:
        sql = " ".join(
            r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE name IN ('memories', 'memory_tags')")
        )
        writes = (
            "INSERT INTO memories(robot, type, content, confidence, content_hash, created_at, updated_at) "
            "VALUES ('r', 'fact', 'x', 0.5, 'h', 0, 0)",
            "INSERT INTO memory_tags(memory_id, tag, source) VALUES (1, 't', 'user')",
            "UPDATE memories SET status = 'forgotten' WHERE id = 1",
        )
        ops = [r[1] for w in writes for r in conn.execute(f"EXPLAIN {w}")]
    finally:
        conn.close()
    return sql, ops.count("OpenEphemeral")


def test_a_version_21_file_checks_a_status_and_a_tag_source_without_temporary_tables(tmp_path: Path) -> None:
    """Migration 22: the CHECK constraints on a memory's status and a tag's source were IN lists
    of three, for which SQLite builds a temporary b-tree on every row it checks (four per learn).
    They become comparisons joined by OR — in place, every row kept — and still refuse what they
    refused."""
    fresh_sql, fresh_temporary = _checks_and_temporary_tables(_fresh(tmp_path / "fresh"))
    first = _learned_then_back_to(
        tmp_path,
        21,
        "PRAGMA writable_schema=ON",
        "UPDATE sqlite_master SET sql = replace(replace(sql, "
        "'status = ''active'' OR status = ''forgotten'' OR status = ''superseded''', "
        "'status IN (''active'', ''forgotten'', ''superseded'')'), "
        "'source = ''auto'' OR source = ''user'' OR source = ''import''', "
        "'source IN (''auto'', ''user'', ''import'')') WHERE name IN ('memories', 'memory_tags')",
    )
    old_sql, old_temporary = _checks_and_temporary_tables(tmp_path / "index.db")
    assert "status IN ('active', 'forgotten', 'superseded')" in old_sql
    assert old_temporary == 3

    with RobotMemory(tmp_path, robot_id="rap-1") as mem:
        assert [m["id"] for m in mem.recall("gripper slips")] == [first]
        mem.learn("the dock drifts 2 cm left", {"tags": ["dock"]})
    path = tmp_path / "index.db"
    sql, temporary = _checks_and_temporary_tables(path)
    assert (temporary, fresh_temporary) == (0, 0)
    for table_sql in (sql, fresh_sql):
        assert " IN ('active'" not in table_sql
        assert " IN ('auto'" not in table_sql
        assert "status = 'superseded'" in table_sql
        assert "source = 'import'" in table_sql
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            conn.execute("UPDATE memories SET status = 'lost' WHERE id = ?", (first,))
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            conn.execute("INSERT INTO memory_tags(memory_id, tag, source) VALUES (?, 'x', 'guess')", (first,))
        conn.execute("UPDATE memories SET status = 'superseded' WHERE id = ?", (first,))  # still allowed
    finally:
        conn.close()


def _fresh(data: Path) -> Path:
    with RobotMemory(data, robot_id="rap-1") as mem:
        mem.learn("a first memory")
    return data / "index.db"


def test_a_version_23_file_gets_every_index_entrys_length_from_the_index(tmp_path: Path) -> None:
    """Migration 24: `memory_lengths` is created and filled from the index itself (its
    instances), one row per entry — an empty text too — and the keyword cache ranks from it."""
    mem = RobotMemory(tmp_path, robot_id="rap-1", embedder="none")
    mem.learn("the blue bin jams at 30 N, the blue one", {"task": {"name": "sort blue bins"}})
    mem.learn("the red bin opens at 12 N", {"params": {"force": 12}})
    mem.close()
    path = tmp_path / "index.db"
    conn = sqlite3.connect(path)
    try:  # as the writes counted them, with the cache's tokenizer
        written = conn.execute("SELECT id, content, context FROM memory_lengths ORDER BY id").fetchall()
    finally:
        conn.close()
    assert written[0] == (1, 10, 3)  # "the blue bin jams at 30 n the blue one", "sort blue bins"
    _back_to(
        path,
        23,
        "DROP TRIGGER memories_text_log",
        "DROP TRIGGER memories_rank_log_insert",
        "CREATE TRIGGER memories_rank_log_insert AFTER INSERT ON memories BEGIN SELECT 1; END",
        "DROP TABLE memory_lengths",
        "INSERT INTO memories(id, robot, collection, type, content, category, confidence, context, content_hash, "
        "created_at, updated_at) VALUES (7, 'rap-1', 'default', 'fact', 'x', 'observation', 0.9, '{}', 'x', 0, 0)",
        "INSERT INTO memories_fts(rowid, content, context) VALUES (7, '', '')",
    )
    mem = RobotMemory(tmp_path, robot_id="rap-1", embedder="none")
    try:
        assert [m["id"] for m in mem.recall("blue bin", n=5)][:1] == [1]
    finally:
        mem.close()
    conn = sqlite3.connect(path)
    try:
        lengths = conn.execute("SELECT id, content, context FROM memory_lengths ORDER BY id").fetchall()
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    finally:
        conn.close()
    assert lengths == [*written, (7, 0, 0)]
    assert "memories_text_log" in triggers
