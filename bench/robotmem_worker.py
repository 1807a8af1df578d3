"""robotmem's side of bench/bench_robotmem_compare.py, run by **robotmem's own interpreter**.

    /tmp/robotmem-venv/bin/python bench/robotmem_worker.py DB_PATH

Opens robotmem 0.1.3's Python SDK (``robotmem.sdk.RobotMemory``) keyword-only, as it runs
offline (``embed_backend="none"``), on DB_PATH, then answers one JSON command per stdin line with
one JSON line on stdout, timing each call on this side of the pipe (wall and CPU time of this
process, so the pipe never counts):

- ``{"op": "learn", "items": [[insight, context, collection], …]}`` → totals (wall and CPU);
- ``{"op": "batch_learn", "items": […]}`` → robotmem's ``batch_learn``, timed as one call;
- ``{"op": "recall", "queries": […], "count": N, "context_filter": {…} | null}`` → per-call walls;
- ``{"op": "count"}`` → active memories; ``{"op": "close"}``.

robotmem is imported by name at run time: this file is type-checked with our code, where robotmem
is not installed. It imports nothing of ours.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from typing import Any


def learn(mem: Any, items: list[list[Any]]) -> dict[str, Any]:
    created = duplicates = errors = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for insight, context, collection in items:
        try:
            out = mem.learn(insight, context=context, collection=collection)
        except Exception:  # robotmem raises its own errors; count them, as a loop would
            errors += 1
            continue
        if out.get("status") == "created":
            created += 1
        else:
            duplicates += 1
    return {
        "n": len(items),
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - cpu0,
        "created": created,
        "duplicates": duplicates,
        "errors": errors,
    }


def batch_learn(mem: Any, items: list[list[Any]]) -> dict[str, Any]:
    """robotmem's own batch API (``batch_learn``: a learn per item, errors collected)."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    out = mem.batch_learn([{"insight": i, "context": c, "collection": coll} for i, c, coll in items])
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    created = sum(1 for o in out if o.get("status") == "created")
    return {"n": len(items), "wall_s": wall, "cpu_s": cpu, "created": created}


def recall(mem: Any, queries: list[str], count: int, context_filter: Any) -> dict[str, Any]:
    walls: list[float] = []
    empty = errors = 0
    cpu0 = time.process_time()
    for i in range(count):
        t = time.perf_counter()
        try:
            found = mem.recall(queries[i % len(queries)], n=5, context_filter=context_filter)
        except Exception:
            errors += 1
            found = []
        walls.append(time.perf_counter() - t)
        if not found:
            empty += 1
    return {"walls": walls, "cpu_s": time.process_time() - cpu0, "empty": empty, "errors": errors}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: robotmem_worker.py DB_PATH\n")
        return 2
    sdk = importlib.import_module("robotmem.sdk")
    version = importlib.import_module("robotmem").__version__
    mem = sdk.RobotMemory(db_path=argv[1], embed_backend="none")
    print(json.dumps({"ready": True, "version": version}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "learn":
            out = learn(mem, cmd["items"])
        elif op == "batch_learn":
            out = batch_learn(mem, cmd["items"])
        elif op == "recall":
            out = recall(mem, cmd["queries"], cmd["count"], cmd.get("context_filter"))
        elif op == "count":
            row = mem._db.conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()
            out = {"count": row[0]}
        elif op == "close":
            mem.close()
            print(json.dumps({"closed": True}), flush=True)
            return 0
        else:
            out = {"error": f"unknown op {op}"}
        print(json.dumps(out), flush=True)
    mem.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
