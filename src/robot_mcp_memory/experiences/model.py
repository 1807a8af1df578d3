"""The experience memory's values, limits and argument parsing (pure).

A memory is a **fact** (an insight learned in an episode) or a **perception** (what a sensor saw,
felt or heard, with optional bounded data). Its context is a JSON object in robotmem's shape —
``params``, ``spatial``, ``robot``, ``task`` sections plus anything else — extracted again on
recall. Times are epoch seconds (floats); adapters render them as ISO-8601.
"""

from __future__ import annotations

import decimal
import json
import math
import numbers
import operator
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from robot_mcp_memory import jsonvalue
from robot_mcp_memory.errors import InvalidInput
from robot_mcp_memory.experiences.filters import json_path, parse_path

MAX_INSIGHT = 10_000
MAX_QUERY = 4_000
MAX_CONTEXT_BYTES = 64 * 1024
MAX_DATA_BYTES = 256 * 1024
MAX_METADATA_BYTES = 16 * 1024
MAX_FILTER_BYTES = 16 * 1024
MAX_REASON = 1_000
MAX_N = 100
MAX_BATCH = 10_000
SECTIONS = ("params", "spatial", "robot", "task")

#: Time decay, computed from a memory's age at read time and never written back: the effective
#: confidence is ``confidence × max(DECAY_FLOOR, 0.5 ** (age / HALF_LIFE))``. The half-life
#: matches robotmem's 1 %/day; the floor keeps a robot's old experience recallable at the default
#: ``min_confidence`` (0.8 × 0.5 = 0.4 ≥ 0.3) while letting weak, old memories fade.
HALF_LIFE_S = 69.3 * 86_400
DECAY_FLOOR = 0.5
#: Real-world experience outranks simulation by this factor (robotmem's source weighting).
REAL_WEIGHT = 1.5
#: The largest source weight ranking honours (a stored weight above it counts as this much). The
#: bound lets keyword recall skip joining matches that cannot reach the top (ranking_repo._ranking_sql).
MAX_SOURCE_WEIGHT = max(REAL_WEIGHT, 1.0)

MemoryType = Literal["fact", "perception"]
Status = Literal["active", "forgotten", "superseded"]
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}\Z")
_PERCEPTION_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,31}\Z")


def decay_factor(age_s: float) -> float:
    return max(DECAY_FLOOR, float(0.5 ** (max(0.0, age_s) / HALF_LIFE_S)))


def effective_confidence(confidence: float, updated_at: float, now: float | None = None) -> float:
    return confidence * decay_factor((time.time() if now is None else now) - updated_at)


@dataclass(frozen=True)
class Experience:
    """One stored memory."""

    id: int
    robot: str
    collection: str
    type: MemoryType
    content: str
    category: str
    confidence: float
    context: dict[str, Any]
    perception_type: str | None
    data: Any
    metadata: dict[str, Any]
    session_id: str | None
    status: Status
    superseded_by: int | None
    forget_reason: str | None
    created_at: float
    updated_at: float
    #: None where the caller is not shown them: a fleet-wide memory's counters are the whole
    #: fleet's, so a robot token would see when other groups recall it (`without_activity`).
    access_count: int | None
    last_accessed: float | None
    #: The id every caller is shown and hands back (`PUBLIC_FROM`); `id` is the stored one, which
    #: never leaves the service. `superseded_by` is read as the other memory's public id.
    public_id: int
    tags: tuple[str, ...] = ()
    has_data: bool = False  # true when the perception has data (`data` may not have been read)

    def shown(self) -> Experience:
        """This memory as callers see it: its public id in place of the stored one."""
        return replace(self, id=self.public_id)

    def without_activity(self) -> Experience:
        """This memory without its access counters."""
        return replace(self, access_count=None, last_accessed=None)

    def section(self, name: str) -> dict[str, Any]:
        value = self.context.get(name)
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class NewMemory:
    """A memory about to be written (everything the write pipeline decided)."""

    robot: str
    collection: str
    type: MemoryType
    content: str
    category: str
    confidence: float
    context: dict[str, Any]
    content_hash: str
    source_weight: float
    facts_hash: str = ""  # digest of the decisive facts (dedup.facts_hash); '' for perceptions
    session_id: str | None = None
    perception_type: str | None = None
    data: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: tuple[tuple[str, str], ...] = ()  # (tag, source)


@dataclass(frozen=True)
class Session:
    id: str
    robot: str
    collection: str
    context: dict[str, Any]
    started_at: float
    ended_at: float | None = None
    outcome_score: float | None = None
    summary: dict[str, Any] | None = None


@dataclass(frozen=True)
class Spatial:
    """``spatial_sort``: order by Euclidean distance of the coordinate list at `path` to `target`,
    blended with relevance (`weight` is the share of proximity, 0–1)."""

    path: str
    target: tuple[float, ...]
    max_distance: float | None = None
    weight: float = 0.5

    @property
    def scale(self) -> float:
        """The distance at which proximity counts half: max_distance/2, else one unit."""
        return self.max_distance / 2 if self.max_distance else 1.0

    def proximity(self, dist2: float | None) -> float:
        if dist2 is None:
            return 0.0
        return 1.0 / (1.0 + math.sqrt(max(0.0, dist2)) / self.scale)


# ---------------------------------------------------------------------------- argument parsing
def utf8(text: str, what: str) -> str:
    """`text` if it can be stored (UTF-8 encodable: no lone surrogates), else `InvalidInput`."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid Unicode text (it holds a lone surrogate); send UTF-8") from exc
    return text


def parse_json(value: Any, what: str, max_bytes: int) -> Any:
    """A JSON value given as itself or as a JSON string, re-encoded strictly and bounded (size,
    depth, plain values: `jsonvalue.check` — tuples and numpy numbers made plain, non-string keys
    refused)."""
    if isinstance(value, str):
        try:
            value = jsonvalue.loads(utf8(value, what))
        except ValueError as exc:
            raise InvalidInput(f'{what} must be JSON (an object such as {{"force": 12.5}}) or an object') from exc
    value = jsonvalue.check(value, what)  # plain values, finite numbers, at most MAX_DEPTH deep
    try:
        encoded = jsonvalue.encode(value)
    except ValueError as exc:  # what `check` lets through that UTF-8 cannot hold
        raise InvalidInput(f"{what} is not valid Unicode text (it holds a lone surrogate); send UTF-8") from exc
    if len(encoded) > max_bytes:
        raise InvalidInput(f"{what} is larger than {max_bytes // 1024} KB once encoded; store less or summarise it")
    # `check` built it afresh out of plain values only, which encode and decode to themselves
    # (floats by their shortest repr): decoding `encoded` again would give the same value.
    return value


def parse_data(value: Any) -> Any:
    """Perception data: any JSON value, bounded like every blob.

    A string is decoded **once**: JSON text gives its value (``'{"force": 12}'`` an object,
    ``'12'`` the number, ``'"12"'`` the text ``12``, ``'null'`` no data at all), and a string
    that is not JSON is kept as the text it is (a caption, base64). The decoded value is checked
    and bounded, never parsed again — a decoded string is text, whatever it looks like. Text that
    would be JSON but for NaN or Infinity (``'{"f": NaN}'``) is refused, as in every other JSON
    argument, rather than stored as a string that only looks like the object."""
    if not isinstance(value, str):
        return parse_json(value, "data", MAX_DATA_BYTES)  # parse_json decodes only strings
    text = utf8(value, "data")
    try:
        decoded = jsonvalue.loads(text)  # InvalidInput for JSON nested past the interpreter's limit
    except ValueError:
        if _json_but_for_constants(text):
            raise InvalidInput(
                "data must contain only JSON values (no NaN or Infinity); send null for a missing reading, "
                "or quote the text as a JSON string to store it as text"
            ) from None
        decoded = text  # not JSON: text, stored as it is
    if not isinstance(decoded, str):
        return parse_json(decoded, "data", MAX_DATA_BYTES)  # checked and bounded; not a str, so not parsed again
    # text: checked again once decoded (a JSON "\ud800" escape decodes to a lone surrogate)
    if len(utf8(decoded, "data").encode()) > MAX_DATA_BYTES:
        raise InvalidInput(f"data is larger than {MAX_DATA_BYTES // 1024} KB; store less or summarise it")
    return decoded


def _json_but_for_constants(text: str) -> bool:
    """Whether `text`, which strict JSON refused, is JSON once NaN and Infinity are allowed
    (Python's ``json`` writes them by default) — a value meant as JSON, not a caption."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def parse_object(value: Mapping[str, Any] | str | None, what: str, max_bytes: int) -> dict[str, Any]:
    """A JSON object given as a dict or a JSON string (None or "" → {}), or `InvalidInput`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    parsed = parse_json(value, what, max_bytes)
    if not isinstance(parsed, dict):
        raise InvalidInput(f'{what} must be a JSON object such as {{"task": {{"success": true}}}}')
    return parsed


def parse_context(value: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """``context`` of learn/update: a JSON object (or its string), or free text kept as ``note``."""
    if isinstance(value, str) and value.strip() and not json_shaped(value):
        if len(utf8(value, "context").encode()) > MAX_CONTEXT_BYTES:
            raise InvalidInput(f"context is larger than {MAX_CONTEXT_BYTES // 1024} KB")
        return {"note": value.strip()}
    return parse_object(value, "context", MAX_CONTEXT_BYTES)


def json_shaped(text: str) -> bool:
    """Whether a context string is meant as JSON: it opens an object, or it is a JSON array
    (refused: a context is an object). Text that merely starts with ``[`` (``"[sim] wet mug"``)
    is a note."""
    t = text.strip()
    if t.startswith("{"):
        return True
    if not t.startswith("["):
        return False
    try:
        jsonvalue.loads(t)
    except (ValueError, InvalidInput):
        return False
    return True


#: How many coordinates `spatial_sort` compares: a position (3), a pose with its quaternion (7), a
#: 7-joint arm's configuration, two arms (14). robotmem took any length; each adds a lookup per
#: memory ranked.
MAX_SPATIAL_DIMS = 16


def parse_spatial(value: Mapping[str, Any] | str | None) -> Spatial | None:
    spec = parse_object(value, "spatial_sort", MAX_FILTER_BYTES)
    if not spec:
        return None
    unknown = set(spec) - {"field", "target", "max_distance", "weight"}
    if unknown:
        raise InvalidInput(f"spatial_sort has unknown keys {sorted(unknown)}; use field, target, max_distance, weight")
    path = spec.get("field", "spatial.position")
    target = spec.get("target")
    if not isinstance(path, str):
        raise InvalidInput("spatial_sort.field must be a dot path such as 'spatial.position'")
    json_path(path, "spatial_sort.field")  # checked here, whichever recall (hybrid too) will use it
    if (
        not isinstance(target, list)
        or not 1 <= len(target) <= MAX_SPATIAL_DIMS
        or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in target)
    ):
        raise InvalidInput(
            f"spatial_sort.target must be a list of 1 to {MAX_SPATIAL_DIMS} numbers, such as [0.4, 0.1, 0.9] "
            "(a position) or a 7-joint configuration"
        )
    max_distance = spec.get("max_distance")
    if max_distance is not None and (
        isinstance(max_distance, bool) or not isinstance(max_distance, int | float) or not 0 < max_distance < 1e12
    ):
        raise InvalidInput("spatial_sort.max_distance must be a positive number below 1e12")
    weight = spec.get("weight", 0.5)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
        raise InvalidInput("spatial_sort.weight must be between 0 and 1")
    return Spatial(
        path, tuple(float(x) for x in target), None if max_distance is None else float(max_distance), float(weight)
    )


#: The largest memory id SQLite can hold (its INTEGER is 64-bit signed).
MAX_ID = 2**63 - 1
#: Memory ids as callers see them. Stored ids are one dense sequence for the whole fleet (the
#: SQLite keyword index is arrays indexed by them), so they are never shown: a memory written
#: since the public ids came in (index.db migration 26, PostgreSQL experience migration 5) is
#: shown by an id drawn at random from [PUBLIC_FROM, 2 × PUBLIC_FROM) when it was written
#: (`draw_public_id`; below 2⁵³, which JavaScript reads exactly), so two of a robot's ids say
#: nothing of how many memories the rest of the fleet wrote between them. A memory without one —
#: written before, loaded from an older dump, inserted by hand — is shown by its stored id, which
#: is below PUBLIC_FROM: the two ranges never meet, and robots keep the ids they were given.
PUBLIC_FROM = 2**48


def draw_public_id() -> int:
    """A fresh public memory id (`PUBLIC_FROM`); the store redraws the rare one already taken."""
    return PUBLIC_FROM + secrets.randbelow(PUBLIC_FROM)


def _is_bool(value: object) -> bool:
    """True/false, Python's or numpy's (``numpy.bool_`` is no ``bool``, nor a number)."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"))


def as_int(value: object, what: str) -> int:
    """A whole-number argument (an id, a count) as a Python ``int``: an ``int``, a numpy integer or
    anything else with ``__index__``, or a float with no fractional part (``5.0``, as robotmem's
    validation took it) — never true/false, text or None (`InvalidInput` naming `what`)."""
    if _is_bool(value):
        raise InvalidInput(f"{what} must be a whole number, not true/false")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, numbers.Real | decimal.Decimal) and not isinstance(value, numbers.Integral):
        try:
            f = float(value)
        except OverflowError as exc:
            raise InvalidInput(f"{what} must be a whole number of a sensible size") from exc
        if math.isfinite(f) and f.is_integer():
            return int(value) if isinstance(value, decimal.Decimal) else int(f)
        raise InvalidInput(f"{what} must be a whole number, not {f!r}")
    if hasattr(type(value), "__index__"):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise InvalidInput(f"{what} must be a whole number, not {_kind(value)}")


def as_real(value: object, what: str) -> float:
    """A number argument (a score, a confidence) as a finite Python ``float``: an ``int``, a
    ``float``, a numpy number (or anything with ``__index__``) — never true/false, text or None
    (`InvalidInput` naming `what`)."""
    if _is_bool(value):
        raise InvalidInput(f"{what} must be a number, not true/false")
    if isinstance(value, numbers.Real | decimal.Decimal):
        try:
            f = float(value)
        except OverflowError as exc:  # 10**400, a huge Fraction: no float holds it
            raise InvalidInput(f"{what} must be a finite number") from exc
    elif hasattr(type(value), "__index__"):
        try:
            f = float(operator.index(value))  # type: ignore[arg-type]
        except (TypeError, OverflowError) as exc:
            raise InvalidInput(f"{what} must be a number, not {_kind(value)}") from exc
    else:
        raise InvalidInput(f"{what} must be a number, not {_kind(value)}")
    if not math.isfinite(f):
        raise InvalidInput(f"{what} must be a finite number")
    return f


def check_memory_id(value: object) -> int:
    """A memory id (1 … 2⁶³-1, the range SQLite stores) as a Python ``int``, or `InvalidInput`."""
    mid = as_int(value, "memory_id")
    if not 1 <= mid <= MAX_ID:
        raise InvalidInput("memory_id must be a memory's id (a whole number from 1), as learn or recall returned it")
    return mid


def _kind(value: object) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def check_collection(collection: str) -> str:
    if not isinstance(collection, str) or not _COLLECTION.match(collection):
        raise InvalidInput(
            "collection must be 1-64 characters of letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit"
        )
    return collection


def check_perception_type(perception_type: str) -> str:
    if not isinstance(perception_type, str) or not _PERCEPTION_TYPE.match(perception_type):
        raise InvalidInput(
            "perception_type must be a short lower-case word such as visual, tactile, auditory, "
            "proprioceptive, procedural"
        )
    return perception_type


def check_text(text: str, what: str, max_chars: int) -> str:
    if not isinstance(text, str):
        raise InvalidInput(f"{what} must be text (a str), not {_kind(text)}")
    if not text.strip():
        raise InvalidInput(f"{what} must not be empty")
    if len(text) > max_chars:
        raise InvalidInput(f"{what} is longer than {max_chars} characters; split it or summarise it")
    return utf8(text, what).strip()


def _offsets(context: Mapping[str, Any], spatial: Spatial) -> list[float] | None:
    """Each coordinate at `spatial.path` minus its target (same rules as the SQL adapters' squared distance: every
    coordinate numeric); an offset too large for a float is infinite."""
    value: Any = context
    for seg in parse_path(spatial.path, "spatial_sort.field"):  # as the adapters' JSON path reads it
        if isinstance(seg, int) and isinstance(value, list) and seg < len(value):
            value = value[seg]
        elif isinstance(seg, str) and isinstance(value, Mapping):
            value = value.get(seg)
        else:
            return None
    if not isinstance(value, list) or len(value) < len(spatial.target):
        return None
    out = []
    for v, t in zip(value, spatial.target, strict=False):
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        try:
            out.append(float(v) - float(t))
        except OverflowError:  # an integer past the float range
            out.append(math.inf)
    return out


def dist2_of(context: Mapping[str, Any], spatial: Spatial) -> float | None:
    """The squared distance ranking computes, in Python, for the few rows a ranking kept. Float
    products, so a square past the float range is infinite (as SQLite's ``pow`` makes it) rather
    than an OverflowError."""
    offsets = _offsets(context, spatial)
    return None if offsets is None else sum(d * d for d in offsets)


def distance_of(context: Mapping[str, Any], spatial: Spatial) -> float | None:
    """The Euclidean distance recall reports: ``math.hypot`` does not overflow where the squares
    do (a coordinate of 1e200 is 1e200 away, not infinitely far); None when it is past the
    float range too, or the memory has no such coordinates (JSON cannot carry an infinity)."""
    offsets = _offsets(context, spatial)
    if offsets is None:
        return None
    d = math.hypot(*offsets)
    return d if math.isfinite(d) else None


__all__ = [
    "DECAY_FLOOR",
    "HALF_LIFE_S",
    "MAX_BATCH",
    "MAX_CONTEXT_BYTES",
    "MAX_DATA_BYTES",
    "MAX_FILTER_BYTES",
    "MAX_ID",
    "MAX_INSIGHT",
    "MAX_METADATA_BYTES",
    "MAX_N",
    "MAX_QUERY",
    "MAX_REASON",
    "MAX_SOURCE_WEIGHT",
    "PUBLIC_FROM",
    "REAL_WEIGHT",
    "SECTIONS",
    "Experience",
    "NewMemory",
    "Session",
    "Spatial",
    "as_int",
    "as_real",
    "check_collection",
    "check_memory_id",
    "check_perception_type",
    "check_text",
    "decay_factor",
    "dist2_of",
    "distance_of",
    "draw_public_id",
    "effective_confidence",
    "json_shaped",
    "parse_context",
    "parse_data",
    "parse_json",
    "parse_object",
    "parse_spatial",
    "utf8",
]
