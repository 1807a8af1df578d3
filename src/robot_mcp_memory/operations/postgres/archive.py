"""The dump's archive on PostgreSQL: the same ``<table>.jsonl`` files SQLite writes and reads
(`operations.archive`), so a dump of either backend loads into the other.

Invariants:

- **SQLite's shape.** Each file holds the SQLite table's columns only (never ``context_doc``,
  ``doclen``, postings or lexemes, which are derived), booleans as 0/1 as SQLite stores them, rows
  in SQLite's order (its BINARY collation: NULL, then numbers, then text by its UTF-8 bytes), keys
  sorted — a dump of a loaded dump is byte-identical, whichever backend made either.
- **A load is a merge in the caller's transaction.** A line replaces the row of the same key in
  place (``ON CONFLICT … DO UPDATE``; columns it leaves out at their defaults), rows it does not
  carry stay. A memory's tags, when the archive carries both files, become exactly the archive's.
  A line that cannot be loaded is refused (`InvalidInput` naming the file, the line and why) before
  the database sees it, so the caller's transaction rolls back with nothing loaded.
- **Derived values are made, never read.** A memory's dedup keys (`dedup.memory_keys`), its jsonb
  ``context_doc``, its keyword postings and length, and the identity past the largest id are
  computed from the loaded rows; vectors of a replaced memory are dropped (tombstones every
  replica applies; the background backfill or `reembed` embeds the loaded text).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences import dedup
from robot_mcp_memory.experiences.postgres import keywords
from robot_mcp_memory.experiences.postgres import vectors as memory_vectors
from robot_mcp_memory.operations.archive import LESSONS_PREFIX, loadable
from robot_mcp_memory.storage import files
from robot_mcp_memory.storage.postgres import Connection

TEXT, INT, REAL, BOOL = "text", "int", "real", "bool"


@dataclass(frozen=True)
class Table:
    """One archived table: its archive file's name, its columns (name → kind) in SQLite's order,
    its primary key, and the columns a line must carry (NOT NULL without a default)."""

    file: str
    name: str
    columns: Mapping[str, str]
    key: tuple[str, ...]
    required: tuple[str, ...]


def _t(file: str, columns: str, key: str, required: str, name: str | None = None) -> Table:
    cols = dict(c.split(":") for c in columns.split())
    return Table(file, name or file, cols, tuple(key.split()), tuple(required.split()))


#: Archived tables in the order a load writes them (a group before the robots in it, a session
#: before the memories naming it, a memory before its tags and its public id).
TABLES: tuple[Table, ...] = (
    _t(
        "fleet_groups",
        "group_id:text name:text customer:text factory:text self_improve:bool created:text updated:text",
        "group_id",
        "group_id created updated",
    ),
    _t(
        "fleet_robots",
        "robot_id:text name:text group_id:text meta:text created:text updated:text",
        "robot_id",
        "robot_id created updated",
    ),
    _t("fleet_settings", "key:text value:text", "key", "key value"),
    _t(
        "process_outcomes",
        "process_id:text n:int at:text success:bool note:text robot:text tenant:text",
        "process_id n",
        "process_id n at success",
    ),
    _t(
        "process_tenant_counts",
        "process_id:text tenant:text success_count:int failure_count:int",
        "process_id tenant",
        "process_id tenant",
    ),
    _t(
        "sessions",
        "id:text robot:text collection:text context:text started_at:real ended_at:real outcome_score:real summary:text",
        "id",
        "id robot started_at",
    ),
    _t(
        "memories",
        "id:int robot:text collection:text type:text content:text category:text confidence:real context:text "
        "perception_type:text metadata:text session_id:text status:text superseded_by:int forget_reason:text "
        "content_hash:text facts_hash:text source_weight:real created_at:real updated_at:real access_count:int "
        "last_accessed:real data:text",
        "id",
        "id robot type content confidence created_at updated_at",
    ),
    _t("memory_tags", "memory_id:int tag:text source:text", "memory_id tag", "memory_id tag"),
    _t("memory_public", "id:int public_id:int", "id", "id public_id"),
    _t(
        LESSONS_PREFIX + "lessons",
        "scope:text key:text place:text params:text success_count:int failure_count:int recorded_by:text "
        "created:text updated:text",
        "scope key place",
        "scope key created updated",
        name="lessons",
    ),
)


#: The values a column's CHECK accepts, by table.
CHOICES: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "memories": {"type": ("fact", "perception"), "status": ("active", "forgotten", "superseded")},
    "memory_tags": {"source": ("auto", "user", "import")},
}


# ---------------------------------------------------------------------------- export
def _order(value: Any) -> tuple[int, Any]:
    """SQLite's order of one value: NULL, numbers, text (BINARY: by UTF-8 bytes, which is code point order)."""
    if value is None:
        return (0, 0)
    if isinstance(value, int | float):
        return (1, value)
    return (2, str(value))


def _stored(kind: str, value: Any) -> Any:
    """A PostgreSQL value as SQLite holds it (a boolean as 0/1)."""
    if kind == BOOL and value is not None:
        return int(bool(value))
    return value


def export_tables(conn: Connection, folder: Path) -> dict[str, int]:
    """Write every archived table into `folder` from the caller's snapshot; rows per file."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for table in TABLES:
        names = list(table.columns)
        rows = [
            [_stored(table.columns[c], v) for c, v in zip(names, row, strict=True)]
            for row in conn.execute(f"SELECT {', '.join(names)} FROM {table.name}")  # noqa: S608 - declared names
        ]
        rows.sort(key=lambda r: [_order(v) for v in r])
        with files.replacing(folder / f"{table.file}.jsonl") as fh:
            for row in rows:
                fh.write(json.dumps(dict(zip(names, row, strict=True)), ensure_ascii=False, sort_keys=True))
                fh.write("\n")
        counts[table.file] = len(rows)
    return counts


# ---------------------------------------------------------------------------- load
def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) of each non-blank line of a ``.jsonl`` file."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for n, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{path} line {n} is not UTF-8 (byte {exc.start}); re-save the file as UTF-8") from exc
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise InvalidInput(f"{path} line {n} is not JSON") from exc
        if not isinstance(row, dict):
            raise InvalidInput(f"{path} line {n} is not a JSON object")
        rows.append((n, row))
    return rows


def _mistyped(table: Table, row: Mapping[str, Any]) -> str | None:
    """Why a value of `row` does not fit its column, or a required column is missing, or None."""
    for name in table.required:
        if row.get(name) is None:
            return f"misses the required field {name}"
    for name, value in row.items():
        kind = table.columns[name]
        if value is None:
            continue
        shown = json.dumps(value, ensure_ascii=False)[:40]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if kind == TEXT and not isinstance(value, str):
            return f"has {name} {shown}, which is not text"
        if kind == BOOL and value not in (0, 1):  # True and False are 1 and 0
            return f"has {name} {shown}, which is not 0 or 1"
        if kind == INT and not (number and float(value).is_integer() and -(2**63) <= value < 2**63):
            return f"has {name} {shown}, which is not a whole number PostgreSQL can hold (64-bit)"
        if kind == REAL and not (number and math.isfinite(value) and abs(value) < 1e308):
            return f"has {name} {shown}, which is not a finite number"
    for name, allowed in CHOICES.get(table.name, {}).items():
        if name in row and row[name] not in allowed:
            shown = json.dumps(row[name], ensure_ascii=False)[:40]
            return f"has {name} {shown}, which is not one of {', '.join(allowed)}"
    if "\x00" in json.dumps(row):
        return "holds a NUL character, which PostgreSQL text cannot store"
    return None


def parse_json(text: Any) -> Any:
    """A stored JSON column's value; text that is not JSON is the text itself."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _memory(row: Mapping[str, Any]) -> dict[str, Any]:
    """A memories line as it is stored: dedup keys computed from its own text, its context as jsonb."""
    context = parse_json(row.get("context", "{}"))
    context = context if isinstance(context, dict) else {}
    perception_type = row.get("perception_type")
    content_hash, facts_hash = dedup.memory_keys(
        str(row["type"]),
        str(row["content"]),
        context,
        perception_type if isinstance(perception_type, str) else None,
        parse_json(row.get("data")),
    )
    return {**row, "content_hash": content_hash, "facts_hash": facts_hash}


def _upsert(table: Table, names: Sequence[str]) -> str:
    """An insert of `names` updating the row of the same key in place, every other column set (to
    its default where the line leaves it out: ``excluded`` holds it)."""
    extra = ["context_doc"] if table.name == "memories" else []
    cols = [*names, *extra]
    values = ["%s" for _ in names] + (["%s::jsonb"] if extra else [])
    rest = [c for c in [*table.columns, *extra] if c not in table.key]
    insert = f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join(values)})"  # noqa: S608 - declared names
    updates = ", ".join(f"{c} = excluded.{c}" for c in rest)
    return f"{insert} ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {updates}"


def _value(kind: str, value: Any) -> Any:
    if kind == BOOL and value is not None:
        return bool(value)
    if kind == INT and isinstance(value, float):
        return int(value)
    return value


def load_tables(conn: Connection, src: Path, interrupt: Callable[[], None]) -> dict[str, int]:
    """Load each archived table's file present in `src` (see the module docstring), in the
    caller's transaction; rows loaded per file. Memories loaded or retagged get their keyword
    entry made again, and the identity is moved past the largest id."""
    loaded: dict[str, int] = {}
    memory_ids: set[int] = set()
    indexed: set[int] = set()
    for table in TABLES:
        path = src / f"{table.file}.jsonl"
        if not path.is_file():
            continue
        rows = _lines(path)
        checked: list[dict[str, Any]] = []
        for i, (n, row) in enumerate(rows):
            if i % 1000 == 0:
                interrupt()
            if not row:
                raise InvalidInput(f"{path} line {n} is an empty JSON object")
            unknown = set(row) - set(table.columns)
            if unknown:
                raise InvalidInput(f"{path} line {n} has unknown columns: {', '.join(sorted(unknown))}")
            why = _mistyped(table, row) or loadable(table.name, row)
            if why is not None:
                raise InvalidInput(f"{path} line {n} {why}; nothing was loaded")
            checked.append(_memory(row) if table.name == "memories" else dict(row))
        _refuse_dangling(conn, table, path, rows, checked, memory_ids)
        if table.name == "memory_public":
            _refuse_taken(conn, path, rows, checked)
        if table.name == "memories":
            memory_ids = {int(r["id"]) for r in checked}
            # A loaded memory is shown as the archive shows it: by the public id its memory_public
            # file gives it, else (a dump from before public ids) by its own id.
            conn.execute("DELETE FROM memory_public WHERE id = ANY(%s)", (sorted(memory_ids),))
        if table.name == "memory_tags" and memory_ids:  # the archive carries the owners: their tags are its
            conn.execute("DELETE FROM memory_tags WHERE memory_id = ANY(%s)", (sorted(memory_ids),))
        # Runs of lines naming the same columns, in file order: a key repeated later still wins.
        batches: list[tuple[tuple[str, ...], list[list[Any]]]] = []
        for row in checked:
            params = [_value(table.columns[c], row[c]) for c in row]
            if table.name == "memories":
                context = parse_json(row.get("context", "{}"))
                params.append(json.dumps(context if isinstance(context, dict) else {}))
            if not batches or batches[-1][0] != tuple(row):
                batches.append((tuple(row), []))
            batches[-1][1].append(params)
        with conn.cursor() as cur:
            for names, batch in batches:
                cur.executemany(_upsert(table, names), batch)
        if table.name == "memories":
            indexed |= memory_ids
            # After the rows, as every memory write takes the vector feed's lock: tombstones every
            # replica's cache applies; the backfill embeds the loaded text.
            memory_vectors.drop(conn, memory_ids)
        if table.name == "memory_tags":
            indexed |= {int(r["memory_id"]) for r in checked}
        loaded[table.file] = len(checked)
    if "memories" in loaded:
        _refuse_unlinked(conn, sorted(memory_ids))
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('memories', 'id'), coalesce(max(id), 1), max(id) IS NOT NULL) "
            "FROM memories"
        )
    reindex_memories(conn, sorted(indexed), interrupt)
    if any(f in loaded for f in ("fleet_groups", "fleet_robots", "fleet_settings")):
        conn.execute("UPDATE fleet_state SET version = version + 1 WHERE id = 1")  # replicas read the fleet again
    return loaded


def _refuse_dangling(
    conn: Connection,
    table: Table,
    path: Path,
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    checked: Sequence[Mapping[str, Any]],
    memory_ids: set[int],
) -> None:
    """`InvalidInput` for a row naming a group or memory that neither the archive nor the store holds."""
    if table.name == "fleet_robots":
        column, target, key = "group_id", "fleet_groups", "group_id"
    elif table.name == "memory_tags":
        column, target, key = "memory_id", "memories", "id"
    elif table.name == "memory_public":
        column, target, key = "id", "memories", "id"
    else:
        return
    named = {r[column] for r in checked if r.get(column) is not None}
    found = {r[0] for r in conn.execute(f"SELECT {key} FROM {target} WHERE {key} = ANY(%s)", (sorted(named),))}  # noqa: S608 - declared names
    for (n, _), row in zip(rows, checked, strict=True):
        value = row.get(column)
        if value is not None and value not in found:
            shown = json.dumps(value, ensure_ascii=False)
            raise InvalidInput(
                f"{path} line {n} has {column} {shown}, which names no row of {target}; nothing was loaded"
            )


def _refuse_taken(
    conn: Connection, path: Path, rows: Sequence[tuple[int, Mapping[str, Any]]], checked: Sequence[Mapping[str, Any]]
) -> None:
    """`InvalidInput` for a public id another line of the file, or another memory of the store,
    already shows (each shows one memory), naming the line, as SQLite's load does."""
    ids = [int(r["id"]) for r in checked if r.get("id") is not None]
    wanted = [int(r["public_id"]) for r in checked if r.get("public_id") is not None]
    held = {
        int(p)
        for (p,) in conn.execute(
            "SELECT public_id FROM memory_public WHERE public_id = ANY(%s) AND id <> ALL(%s)", (wanted, ids)
        )
    }
    seen: set[int] = set()
    for (n, _), row in zip(rows, checked, strict=True):
        value = row.get("public_id")
        if value is None:
            continue
        if int(value) in seen or int(value) in held:
            raise InvalidInput(
                f"{path} line {n} has public_id {int(value)}, which another memory has; nothing was loaded"
            )
        seen.add(int(value))


def _refuse_unlinked(conn: Connection, ids: Sequence[int]) -> None:
    """`InvalidInput` for a loaded memory in a session, or superseded by a memory, that exists nowhere."""
    row = conn.execute(
        "SELECT m.id, 'session_id', m.session_id FROM memories m WHERE m.id = ANY(%s) AND m.session_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id) "
        "UNION ALL SELECT m.id, 'superseded_by', m.superseded_by::text FROM memories m WHERE m.id = ANY(%s) "
        "AND m.superseded_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM memories o WHERE o.id = m.superseded_by) "
        "LIMIT 1",
        (list(ids), list(ids)),
    ).fetchone()
    if row is not None:
        raise InvalidInput(
            f"memories.jsonl: memory {row[0]} has {row[1]} {row[2]!r}, which names nothing the archive or the "
            "store holds (files of two dumps mixed?); nothing was loaded"
        )


def reindex_memories(conn: Connection, ids: Iterable[int] | None, interrupt: Callable[[], None]) -> int:
    """Make the keyword entry of each memory of `ids` (every memory: None) from its row and user
    tags, in the caller's transaction; how many."""
    where, params = ("", []) if ids is None else ("WHERE id = ANY(%s)", [list(ids)])
    rows = conn.execute(f"SELECT id, content, context FROM memories {where} ORDER BY id", params).fetchall()  # noqa: S608 - fixed text
    tags: dict[int, list[str]] = {}
    for mid, tag in conn.execute(
        f"SELECT memory_id, tag FROM memory_tags WHERE source = 'user' {where.replace('WHERE id', 'AND memory_id')} "  # noqa: S608 - fixed text
        "ORDER BY memory_id, tag",
        params,
    ):
        tags.setdefault(int(mid), []).append(str(tag))
    for i, (mid, content, context) in enumerate(rows):
        if i % 1000 == 0:
            interrupt()
        parsed = parse_json(context)
        keywords.write_entry(
            conn, int(mid), keywords.entry(content, parsed if isinstance(parsed, dict) else {}, tags.get(int(mid), []))
        )
    return len(rows)
