"""Benchmark: save_process and find_processes at 1k and 10k process documents.

    python bench/bench_processes.py [--sizes 1000,10000] [--queries 200] [--out FILE] [--embedder none]

What it measures, on a fresh ``index.db`` in a temporary directory:

1. through the service layer (`memory.processes`, the ADMIN principal): save throughput and
   per-call latency while filling to each size; find latency over a fixed set of
   natural-language queries at each size; record_outcome latency (hot path without a note, and
   the definition write with a note);
2. through the in-memory MCP client at the largest size: ``find_processes`` and ``save_process``
   tool calls, next to a trivial ``list_processes(limit=1)`` baseline measured in the same run;
3. the size of ``index.db`` (after a WAL checkpoint) at each size.

Wall-clock latencies come with the process CPU time per call, which other work on a shared
machine inflates less.

The corpus is synthetic but shaped like the real thing (robot task families across many rooms,
objects and colours; frontmatter plus ``## Steps`` / ``## Pitfalls & fixes`` bodies of 1–2 KB) and
fully determined by the seed. Results are a markdown report on stdout. `run_benchmark` is the
importable core; tests/bench/test_bench_smoke.py runs it at a tiny size (no timing assertions).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import TextContent

from robot_mcp_memory import logs
from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.surfaces.mcp.server import build_server
from robot_mcp_memory.tenancy.principal import ADMIN

SEED = 20260612

# ---------------------------------------------------------------------------- the synthetic corpus
ROOMS = (
    "mailroom", "kitchen", "reception", "lab 3", "lab 7", "server room", "conference room B",
    "conference room D", "warehouse bay 2", "loading dock", "break room", "copy room", "cafeteria",
    "lobby", "clean room", "workshop", "storage room 4", "nurse station", "pharmacy", "patient room 12",
    "office 214", "office 305", "library", "gym", "parking garage", "roof terrace", "electrical room",
    "boiler room", "print shop", "archive",
)  # fmt: skip
OBJECTS = (
    "package", "parcel", "coffee mug", "water bottle", "toolbox", "laptop", "first-aid kit", "clipboard",
    "tablet", "visitor badge", "medicine tray", "sample rack", "cable reel", "printer paper", "key ring",
    "lunch bag", "umbrella", "headset", "screwdriver set", "document folder",
)  # fmt: skip
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "orange", "purple", "grey", "silver")
TARGETS = (
    "fire extinguisher", "smoke detector", "emergency exit sign", "pressure gauge", "rack temperature",
    "water leak sensor", "first-aid cabinet", "eyewash station", "door lock", "air filter",
)  # fmt: skip
CHORES = (
    "wipe the tables", "vacuum the floor", "empty the trash bins", "mop the spill", "sanitize the door handles",
    "clear the countertop", "restock the paper towels", "tidy the chairs",
)  # fmt: skip
DOORS = ("fire door", "security door", "sliding door", "push-button door", "double door", "badge door")
ROBOTS = (
    "g1-lab-01", "g1-lab-02", "rap-1", "rap-2", "rap-3", "tiago-07", "spot-02", "fetch-11", "stretch-04",
    "tb4-09", "h1-east", "h1-west",
)  # fmt: skip
COMMON_PITFALLS = (
    "Battery below 20% before the last leg → return to the dock first; the task resumes from the last step.",
    "Wi-Fi dead zone near the {room} → queue the status report and send it once back on the corridor AP.",
    "Localization drifts on the glossy floor at the {room} → relocalize on the AprilTag by the door.",
    "People standing in the corridor → say 'excuse me' once, wait 10 s, then replan around them.",
    "The {room} is reorganised on Mondays → refresh the map layer before navigating inside.",
    "Cleaning cart blocks the hallway after 17:00 → take the service corridor instead.",
)
FAMILY_PITFALLS: dict[str, tuple[str, ...]] = {
    "delivery": (
        "Recipient not at the desk → leave the {object} on the shelf labelled 'incoming' and send a message.",
        "The {colour} {object} looks like the neighbour's in low light → confirm the label with OCR first.",
        "Heavy {object} (> 3 kg) slips with the pinch grasp → use the two-hand carry profile.",
        "Reception asks for a signature → call speech.ask('Could you confirm receipt?') and log the name.",
    ),
    "fetch": (
        "The {object} is on the top shelf out of reach → ask a person nearby, do not climb or stack.",
        "Several {colour} {object}s in the {room} → pick the one matching the owner's name tag.",
        "perception.find_object returns nothing when the lights are off → switch on the lights by the door.",
        "The {object} is inside a closed drawer → open it with the handle-pull primitive, then close it again.",
    ),
    "inspection": (
        "Gauge needle glare → move 20 cm to the left before taking the photo.",
        "The {target} tag is faded → read the serial number from the photo and flag it for replacement.",
        "Inspection report rejected when the timestamp is missing → always attach the photo metadata.",
        "Some {target}s are behind the {colour} cabinet → open it; it is not locked during working hours.",
    ),
    "cleaning": (
        "Wet floor after mopping → place the yellow sign and skip that area for 15 min.",
        "Trash bin liner tears when full → lift slowly and check the weight estimate first.",
        "Sanitizer bottle almost empty → refill from the storage room 4 cabinet before starting.",
        "Cables under the desks get caught in the brushes → lift the cables or mark a keep-out zone.",
    ),
    "door": (
        "The {door} closes after 8 s → pass through immediately after the badge beep.",
        "Badge reader does not respond → retry once, then call security on the intercom.",
        "The {door} is heavy → push at the handle side with the arm fully extended, not the shoulder.",
        "Door held open by a wedge on Fridays → do not remove it, just pass.",
    ),
    "elevator": (
        "Elevator full → wait for the next car instead of squeezing in.",
        "Button press not detected on the first try → press for 1 s and watch for the light.",
        "Freight elevator needs a key after 19:00 → ask the front desk to call it.",
        "Floor {floor} lobby is crowded at lunch → wait inside the car until the doors are clear.",
    ),
}
FAMILIES = tuple(FAMILY_PITFALLS)


def _slug(text: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def _fill(template: str, slots: dict[str, str]) -> str:
    return template.format(**slots)


def make_document(i: int, rng: random.Random) -> str:
    """One synthetic process document (markdown) for index `i`."""
    family = rng.choice(FAMILIES)
    room, room2 = rng.sample(ROOMS, 2)
    obj, colour, target, chore, door = (
        rng.choice(OBJECTS),
        rng.choice(COLOURS),
        rng.choice(TARGETS),
        rng.choice(CHORES),
        rng.choice(DOORS),
    )
    floor = str(rng.randint(1, 9))
    slots = {"room": room, "room2": room2, "object": obj, "colour": colour, "target": target, "door": door}
    slots["floor"] = floor
    nav = f"navigation.navigate_to({_slug(room)}) with trigger eta_below:10"
    steps: list[str]
    if family == "delivery":
        title = f"Deliver the {colour} {obj} to the {room} on floor {floor}"
        pattern = f"deliver|bring|take ... {obj} ... {room}"
        steps = [
            f"navigation.navigate_to({_slug(room2)}) to pick up the {obj}",
            f'perception.find_object("{colour} {obj}") and check the addressee label',
            f"manipulation.grasp(target, profile={'two_hand' if rng.random() < 0.3 else 'pinch'})",
            f"elevator.ride(to_floor={floor}) if not already on floor {floor}",
            nav,
            f'speech.say("Delivery for the {room}")',
            'manipulation.place(target, surface="desk or incoming shelf")',
        ]
    elif family == "fetch":
        title = f"Fetch the {colour} {obj} from the {room}"
        pattern = f"fetch|get|bring ... {obj} ... from ... {room}"
        steps = [
            nav,
            f'on trigger → perception.prewarm("{room}, {obj}, shelves, tables")',
            f'perception.find_object("{colour} {obj}") scanning tables first, then shelves',
            "manipulation.grasp(target, profile=pinch) and verify the grip with the wrist camera",
            f"navigation.navigate_to({_slug(room2)}) back to the requester",
            f'speech.say("Here is your {colour} {obj}") and wait for the hand-over',
        ]
    elif family == "inspection":
        title = f"Inspect the {target}s in the {room}"
        pattern = f"inspect|check|audit ... {target} ... {room}"
        steps = [
            nav,
            f"mapping.load_points_of_interest(room={_slug(room)}, kind={_slug(target)})",
            f"for each {target}: navigation.approach(poi, standoff=0.8)",
            "perception.capture(photo=true, depth=true) and perception.read_gauge() when applicable",
            f"reporting.add_item(kind={_slug(target)}, status=ok|attention, photo=last)",
            "reporting.submit(to=facilities) with the floor plan attached",
        ]
    elif family == "cleaning":
        title = f"Clean the {room}: {chore}"
        pattern = f"clean|tidy ... {room} ... {chore}"
        steps = [
            nav,
            f"perception.segment_surfaces(room={_slug(room)}) to find tables, floor and bins",
            f"cleaning.run(task={_slug(chore)}, pattern=boustrophedon)",
            "perception.check_clean(surface) and repeat once where dirt remains",
            "cleaning.dock_tools() and report the area covered",
        ]
    elif family == "door":
        title = f"Pass the {colour} {door} into the {room}"
        pattern = f"open|pass|go through ... {door} ... {room}"
        steps = [
            f"navigation.navigate_to({_slug(room)}-{_slug(door)}) stopping 1 m before the door",
            f'perception.find_object("{colour} {door} handle or badge reader")',
            "access.badge() or manipulation.push_door(side=handle) depending on the door type",
            "navigation.pass_doorway(speed=slow) while the door is open",
            f"navigation.navigate_to({_slug(room)}) and confirm the door closed behind",
        ]
    else:
        title = f"Take the elevator to floor {floor} for the {room}"
        pattern = f"elevator|lift ... floor {floor} ... {room}"
        steps = [
            "navigation.navigate_to(elevator-lobby) and face the call panel",
            "manipulation.press_button(direction=up|down) and wait for the chime",
            "navigation.enter_elevator() keeping 0.5 m from people",
            f"manipulation.press_button(floor={floor}) and watch the floor display",
            f"navigation.exit_elevator() then {nav}",
        ]
    steps += [f"memory.record_outcome(success) once the {family} task is confirmed"]
    pitfalls = rng.sample(FAMILY_PITFALLS[family], rng.randint(2, 4)) + rng.sample(COMMON_PITFALLS, rng.randint(1, 3))
    tags = [family, _slug(room), f"floor-{floor}"] + ([_slug(obj)] if family in ("delivery", "fetch") else [])
    s, f = rng.randint(0, 12), rng.randint(0, 4)
    day = rng.randint(1, 28)
    lines = [
        "---",
        f"id: {_slug(title)[:100]}-{i:05d}",
        f'title: "{title}"',
        f'task_pattern: "{pattern}"',
        f"tags: [{', '.join(tags)}]",
        f"robot: {rng.choice(ROBOTS)}",
        f"created: 2026-05-{day:02d}T09:00:00Z",
        f"success_count: {s}",
        f"failure_count: {f}",
        f"source_mission_id: m-{rng.getrandbits(32):08x}",
        "---",
        "",
        "## Steps",
        *(f"{n}. {step}" for n, step in enumerate(steps, 1)),
        "",
        "## Pitfalls & fixes",
        *(f"- {_fill(p, slots)}" for p in pitfalls),
    ]
    if rng.random() < 0.6:
        lines += ["", "## Operator notes", f"- Ask at the {room2} if anything about the {room} is unclear."]
    return "\n".join(lines) + "\n"


QUERY_TEMPLATES = (
    "bring the {colour} {object} from the {room2} to the {room}",
    "please deliver this {object} to the {room} on floor {floor}",
    "can you fetch my {colour} {object}? I left it in the {room}",
    "get the {object} from the {room} and bring it to me",
    "inspect the {target}s in the {room}",
    "do the weekly check of every {target} on floor {floor}",
    "clean up the {room}: {chore}",
    "{chore} in the {room} before the meeting",
    "go through the {door} into the {room}",
    "take the elevator to floor {floor} and go to the {room}",
    "the {colour} {object} needs to go to the {room}, it is urgent",
    "water the plants in the atrium",  # nothing in the corpus is about this
)


def make_queries(n: int, seed: int = SEED) -> list[str]:
    """A fixed set of natural-language instructions, independent of the corpus size."""
    rng = random.Random(seed + 1)
    out: list[str] = []
    for _ in range(n):
        room, room2 = rng.sample(ROOMS, 2)
        slots = {
            "room": room,
            "room2": room2,
            "object": rng.choice(OBJECTS),
            "colour": rng.choice(COLOURS),
            "target": rng.choice(TARGETS),
            "chore": rng.choice(CHORES),
            "door": rng.choice(DOORS),
            "floor": str(rng.randint(1, 9)),
        }
        out.append(_fill(rng.choice(QUERY_TEMPLATES), slots))
    return out


def make_documents(n: int, seed: int = SEED) -> list[str]:
    rng = random.Random(seed)
    return [make_document(i, rng) for i in range(n)]


# ---------------------------------------------------------------------------- measurement
@dataclass(frozen=True)
class Latency:
    n: int
    p50_ms: float
    p95_ms: float
    mean_ms: float

    @classmethod
    def of(cls, samples_ns: Sequence[int]) -> Latency:
        if not samples_ns:
            return cls(0, math.nan, math.nan, math.nan)
        ordered = sorted(samples_ns)

        def rank(p: float) -> float:  # nearest-rank percentile
            return ordered[max(0, math.ceil(p * len(ordered)) - 1)] / 1e6

        return cls(len(ordered), rank(0.50), rank(0.95), sum(ordered) / len(ordered) / 1e6)


@dataclass(frozen=True)
class SizeResult:
    size: int
    saves: Latency  # the saves that filled the store from the previous size to this one
    saves_tail: Latency  # the last tenth of them: shows whether a save slows down as the store grows
    save_docs_per_s: float
    save_cpu_ms: float  # process CPU time per save (all threads): steadier than wall time on a busy machine
    find: Latency
    find_cpu_ms: float
    find_mean_hits: float
    find_modes: tuple[str, ...]  # "keyword", or "hybrid" when an embedder is on and ready
    outcome: Latency  # record_outcome without a note: the hot counter write
    outcome_note: Latency  # with a note: the body changes, a definition write
    db_bytes: int


@dataclass(frozen=True)
class McpResult:
    size: int
    find: Latency
    save: Latency
    baseline: Latency  # list_processes(limit=1), interleaved with the finds


@dataclass(frozen=True)
class Machine:
    nproc: int
    cpu: str
    python: str
    sqlite: str
    platform: str
    load: tuple[float, float, float]  # 1/5/15-minute load average when the run ended


@dataclass(frozen=True)
class Report:
    machine: Machine
    revision: str
    embedder: str
    queries: int
    doc_bytes_mean: float
    sizes: list[SizeResult]
    mcp: McpResult
    elapsed_s: float


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


async def _timed_saves(memory: Memory, docs: Sequence[str], ids: list[str]) -> tuple[list[int], float, float]:
    """Per-call latencies (ns), wall seconds and process CPU seconds for saving `docs` in turn."""
    samples: list[int] = []
    start, cpu = time.perf_counter(), time.process_time()
    for md in docs:
        t0 = time.perf_counter_ns()
        saved = await memory.processes.save(ADMIN, md)
        samples.append(time.perf_counter_ns() - t0)
        ids.append(saved.doc.id)
    return samples, time.perf_counter() - start, time.process_time() - cpu


async def _timed_finds(memory: Memory, queries: Sequence[str]) -> tuple[list[int], float, float, tuple[str, ...]]:
    """Per-call latencies (ns), process CPU seconds, mean hits and the search modes seen."""
    samples: list[int] = []
    hits = 0
    modes: set[str] = set()
    cpu = time.process_time()
    for q in queries:
        t0 = time.perf_counter_ns()
        found = await memory.processes.find(ADMIN, q, 3)
        samples.append(time.perf_counter_ns() - t0)
        hits += len(found.hits)
        modes.add(found.mode)
    return samples, time.process_time() - cpu, hits / max(1, len(queries)), tuple(sorted(modes))


async def _timed_outcomes(memory: Memory, ids: Sequence[str], n: int, rng: random.Random, note: bool) -> list[int]:
    samples: list[int] = []
    for k in range(n):
        pid = rng.choice(ids)
        text = f"bench run {k}: door was open, delivered on time" if note else ""
        t0 = time.perf_counter_ns()
        await memory.processes.record_outcome(ADMIN, pid, rng.random() < 0.8, text)
        samples.append(time.perf_counter_ns() - t0)
    return samples


def _db_bytes(memory: Memory) -> int:
    memory.index.on_writer(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    path = memory.settings.index_path
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


async def _mcp_phase(memory: Memory, queries: Sequence[str], new_docs: Sequence[str], size: int) -> McpResult:
    async with create_connected_server_and_client_session(build_server(memory).lowlevel) as session:

        async def call(tool: str, args: dict[str, Any]) -> int:
            t0 = time.perf_counter_ns()
            result = await session.call_tool(tool, args)
            elapsed = time.perf_counter_ns() - t0
            block = result.content[0] if result.content else None
            data = json.loads(block.text) if isinstance(block, TextContent) else None
            if result.isError or not isinstance(data, dict) or "error" in data:
                raise RuntimeError(f"{tool} failed during the benchmark: {result.content!r}")
            return elapsed

        for q in queries[:10]:  # warm-up: reader connections, pydantic schemas
            await call("find_processes", {"query": q})
            await call("list_processes", {"limit": 1})
        finds: list[int] = []
        base: list[int] = []
        for q in queries:
            finds.append(await call("find_processes", {"query": q}))
            base.append(await call("list_processes", {"limit": 1}))
        saves = [await call("save_process", {"markdown": md}) for md in new_docs]
    return McpResult(size, Latency.of(finds), Latency.of(saves), Latency.of(base))


async def run_benchmark(
    data_dir: Path,
    sizes: Sequence[int] = (1000, 10_000),
    n_queries: int = 200,
    *,
    outcomes: int = 200,
    mcp_saves: int = 200,
    seed: int = SEED,
    embedder: str = "none",
) -> Report:
    """Fill a fresh store in `data_dir` to each of `sizes` (ascending) and measure; see the module doc.

    `embedder` is MEMORY_EMBEDDER: ``none`` (the default) measures the keyword path alone."""
    if list(sizes) != sorted(set(sizes)) or not sizes or sizes[0] < 1:
        raise ValueError("sizes must be distinct positive integers in ascending order")
    began = time.perf_counter()
    docs = make_documents(sizes[-1] + mcp_saves, seed)
    queries = make_queries(n_queries, seed)
    rng = random.Random(seed + 2)
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data_dir), "MEMORY_EMBEDDER": embedder}))
    try:
        sqlite_version = str(memory.index.on_writer(lambda c: c.execute("SELECT sqlite_version()").fetchone()[0]))
        ids: list[str] = []
        results: list[SizeResult] = []
        done = 0
        for size in sizes:
            samples, wall, save_cpu = await _timed_saves(memory, docs[done:size], ids)
            done = size
            await _timed_finds(memory, queries[:10])  # warm-up
            finds, find_cpu, mean_hits, modes = await _timed_finds(memory, queries)
            hot = await _timed_outcomes(memory, ids, outcomes, rng, note=False)
            noted = await _timed_outcomes(memory, ids, max(1, outcomes // 4), rng, note=True)
            results.append(
                SizeResult(
                    size=size,
                    saves=Latency.of(samples),
                    saves_tail=Latency.of(samples[-max(1, len(samples) // 10) :]),
                    save_docs_per_s=len(samples) / wall,
                    save_cpu_ms=save_cpu * 1e3 / max(1, len(samples)),
                    find=Latency.of(finds),
                    find_cpu_ms=find_cpu * 1e3 / max(1, len(finds)),
                    find_mean_hits=mean_hits,
                    find_modes=modes,
                    outcome=Latency.of(hot),
                    outcome_note=Latency.of(noted),
                    db_bytes=_db_bytes(memory),
                )
            )
        mcp = await _mcp_phase(memory, queries, docs[sizes[-1] :], sizes[-1])
    finally:
        memory.close()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan, math.nan, math.nan)
    machine = Machine(_nproc(), _cpu_model(), platform.python_version(), sqlite_version, platform.platform(), load)
    doc_bytes = sum(len(d.encode()) for d in docs) / len(docs)
    return Report(machine, _revision(), embedder, n_queries, doc_bytes, results, mcp, time.perf_counter() - began)


def _revision() -> str:
    """The git commit being measured (``+dirty`` with uncommitted changes), or ``unknown``."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


# ---------------------------------------------------------------------------- the report
def _ms(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.2f}"


def render(report: Report, command: str = "") -> str:
    m = report.machine
    out = [
        "### Machine",
        "",
        f"- {m.nproc} CPUs available, {m.cpu}; {m.platform}",
        f"- Python {m.python}, SQLite {m.sqlite}; load average at the end {m.load[0]:.2f} / {m.load[1]:.2f} / "
        f"{m.load[2]:.2f} (1/5/15 min: other work on the machine skews the figures)",
        f"- corpus: synthetic process documents, mean {report.doc_bytes_mean:.0f} bytes of markdown each; "
        f"{report.queries} fixed natural-language queries (k=3)",
        f"- code: {report.revision}; MEMORY_EMBEDDER={report.embedder}; find mode(s): "
        + ", ".join(sorted({m for r in report.sizes for m in r.find_modes})),
    ]
    if command:
        out.append(f"- command: `{command}` (total {report.elapsed_s:.0f} s)")
    out += [
        "",
        "### Service layer (in-process, `memory.processes`)",
        "",
        "| docs | save docs/s | save p50 ms | save p95 ms | save p50 ms, last 10% | save CPU ms | find p50 ms "
        "| find p95 ms | find CPU ms | mean hits | record_outcome p50 / p95 ms | with note p50 / p95 ms "
        "| index.db MB | bytes/doc |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report.sizes:
        out.append(
            f"| {r.size:,} | {r.save_docs_per_s:,.0f} | {_ms(r.saves.p50_ms)} | {_ms(r.saves.p95_ms)} "
            f"| {_ms(r.saves_tail.p50_ms)} | {_ms(r.save_cpu_ms)} | {_ms(r.find.p50_ms)} | {_ms(r.find.p95_ms)} "
            f"| {_ms(r.find_cpu_ms)} | {r.find_mean_hits:.1f} "
            f"| {_ms(r.outcome.p50_ms)} / {_ms(r.outcome.p95_ms)} "
            f"| {_ms(r.outcome_note.p50_ms)} / {_ms(r.outcome_note.p95_ms)} "
            f"| {r.db_bytes / 1e6:.1f} | {r.db_bytes / r.size:,.0f} |"
        )
    out += [
        "",
        "Latencies are wall-clock per call. *CPU ms* is the process's CPU time per call (all threads), which "
        "other work on the machine inflates less. *last 10%* is the median of the last tenth of the saves that "
        "filled the store to that size. *record_outcome* without a note is the hot counter write; with a note "
        "the body changes and the row is re-indexed.",
    ]
    c = report.mcp
    base = c.baseline.p50_ms
    out += [
        "",
        f"### Through the in-memory MCP client at {c.size:,} documents",
        "",
        "| tool call | calls | p50 ms | p95 ms | p50 ÷ baseline p50 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, lat in (
        ("`list_processes(limit=1)` (baseline)", c.baseline),
        ("`find_processes(query, k=3)`", c.find),
        ("`save_process(markdown)` (new documents)", c.save),
    ):
        ratio = lat.p50_ms / base if base and not math.isnan(lat.p50_ms) else math.nan
        out.append(f"| {name} | {lat.n} | {_ms(lat.p50_ms)} | {_ms(lat.p95_ms)} | {_ms(ratio)}× |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000", help="ascending corpus sizes, comma-separated")
    parser.add_argument("--queries", type=int, default=200, help="number of fixed find queries")
    parser.add_argument("--out", type=Path, help="also write the markdown report to this file")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--embedder",
        default="none",
        help="MEMORY_EMBEDDER for the run: none (default, the keyword path), hashing (hybrid, no model); "
        "a real model loads in the background, so early saves and finds may run without it",
    )
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or sizes != sorted(set(sizes)) or sizes[0] < 1:
        parser.error("--sizes must be distinct positive integers in ascending order, e.g. 1000,10000")
    if args.queries < 1:
        parser.error("--queries must be at least 1")
    logs.configure("warning")  # logs go to stderr; stdout carries the report
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        report = asyncio.run(run_benchmark(Path(tmp), sizes, args.queries, seed=args.seed, embedder=args.embedder))
    command = "python bench/bench_processes.py " + " ".join(argv if argv is not None else [])
    text = render(report, command.strip())
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
