"""A process index where relevances tie: ~700 documents over an 11-word vocabulary (and, in
half of them, one of a few dotted numbers: each a phrase and a prefix phrase), 150 of them
saved again (so FTS rowids no longer follow the table's). Shared by the exactness tests of the
keyword list (`tests/search/test_keyword.py`) and of keyword search (`tests/test_process_search_floor.py`)."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from typing import Any

from robot_mcp_memory.processes.docmodel import ProcessDoc
from robot_mcp_memory.processes.sqlite import store as sql
from robot_mcp_memory.storage.sqlite import index_db as db

WORDS = ("fetch", "deliver", "parcel", "mailroom", "kitchen", "door", "elevator", "red", "blue", "floor", "the")
ROBOTS = ("rap-1", "rap-2", "g1", "shared")
NUMBERS = ("1.2.10", "1.10.2", "12.5", "12.50", "19.5", "0.12")
QUERIES = (
    "fetch the red parcel",
    "the",
    "deliver to the kitchen",
    "elevator floor",
    "blue door mailroom",
    "zebra",
    "deliver 12.5 to floor 1.2.10",
    "1.2.10",
)


def tie_heavy_db(seed: int, *, counts: bool, edit: Callable[[ProcessDoc], dict[str, Any]]) -> sqlite3.Connection:
    """The index in memory. `counts` draws success/failure counts (else all 0); `edit` is what the
    second save of 150 documents changes. Robot "rare" owns 1 % of the documents."""
    c = sqlite3.connect(":memory:", isolation_level=None)
    for step in db.MIGRATIONS:
        step(c)
    rng = random.Random(seed)
    numbers = random.Random(seed + 1)  # its own draws: the words stay as they were
    docs = []
    for i in range(700):
        words = rng.choices(WORDS, k=rng.randint(1, 6))
        number = [numbers.choice(NUMBERS)] if numbers.random() < 0.5 else []
        robot = "rare" if i % 100 == 0 else rng.choice(ROBOTS)
        success, failure = rng.choice((0, 0, 1, 3, 9)), rng.choice((0, 0, 1, 2))
        docs.append(
            ProcessDoc(
                id=f"doc-{i:04d}",
                title=" ".join(words[:3]),
                body=" ".join(words + number) + "\n",
                robot=robot,
                created="2026-01-01T00:00:00Z",
                updated="2026-01-01T00:00:00Z",
                success_count=success if counts else 0,
                failure_count=failure if counts else 0,
            )
        )
    for d in docs:
        sql.upsert(c, d)
    for d in rng.sample(docs, 150):
        sql.upsert(c, d.model_copy(update=edit(d)))
    return c
