"""ProcessDoc: the markdown wire format of a process (spec §3). Pure: no I/O.

A document is YAML frontmatter between ``---`` lines and a free markdown body. `parse` validates
and `render` writes it back; ``parse(render(d)) == d`` and rendering is deterministic (known keys
in a fixed order, then any extra keys sorted), so a document round-trips byte for byte once it
has been rendered.

We do not use python-frontmatter: it breaks on keys named ``content``/``handler``. YAML 1.1
surprises are handled here: unquoted dates (which PyYAML makes `datetime`) become ISO strings,
at any depth, and only ``true``/``false`` are booleans (YAML 1.2) — ``title: no`` stays "no".
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import unicodedata
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from robot_mcp_memory.errors import DocumentParseError

#: ``\Z``, not ``$``: ``$`` also matches before a final newline, which let ``"proc-b\n"`` in as an id.
SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*\Z")
MAX_ID = 120
MAX_TITLE = 300
MAX_BODY = 200_000
MAX_DOCUMENT = 256_000
#: Limits of the frontmatter alone, checked before YAML parsing starts (`check_frontmatter`):
#: PyYAML's loader is pure Python and recurses once per level of nesting, so its work must be
#: bounded by what a cheap scan can count. The document limit leaves room for a long body.
MAX_FRONTMATTER = 16_000
MAX_FRONTMATTER_ENTRIES = 1_000
MAX_FRONTMATTER_DEPTH = 20
OUTCOME_HEADING = "## Outcome log"

_KNOWN = (
    "id",
    "title",
    "task_pattern",
    "tags",
    "robot",
    "created",
    "updated",
    "success_count",
    "failure_count",
    "last_used",
    "source_mission_id",
)


def _iso(value: Any) -> str:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return str(value.strftime("%Y-%m-%dT%H:%M:%SZ"))
    if isinstance(value, dt.date):
        return value.strftime("%Y-%m-%dT00:00:00Z")
    return str(value)


class _Loader(yaml.SafeLoader):
    """`yaml.SafeLoader` with YAML 1.2 booleans (``yes``/``no``/``on``/``off`` stay strings) and
    without aliases: ``*name`` repeats an anchored value, so a few hundred characters of nested
    aliases expand to millions of values (a "billion laughs"); a process document has no use for
    them."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted here: write the value out", event.start_mark
            )
        node: yaml.Node | None = super().compose_node(parent, index)
        return node


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


#: Characters YAML reads as line breaks besides LF and CR (NEL, LS, PS).
_YAML_BREAKS = ("\x85", "\u2028", "\u2029")


class _Dumper(yaml.SafeDumper):
    """`yaml.SafeDumper` that writes strings holding NEL/LS/PS double-quoted, where they are
    escaped. PyYAML would emit them raw inside a single-quoted scalar, and a loader folds a raw
    line break there into a space, so the value would not survive the round trip."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = '"' if any(c in data for c in _YAML_BREAKS) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def _c_dumper() -> type[yaml.SafeDumper] | None:
    """`_Dumper`'s representers over libyaml's emitter (PyYAML's C extension); None where PyYAML
    was built without it."""
    base = getattr(yaml, "CSafeDumper", None)
    if base is None:
        return None
    dumper: type[yaml.SafeDumper] = type("_CDumper", (base,), {})
    dumper.add_representer(str, _represent_str)
    return dumper


_CDumper = _c_dumper()

#: The most characters (keys and strings together) a frontmatter may hold to go to `_CDumper`.
#: Below it no emitted line can reach the dump's width (10,000), even with every character
#: escaped (at most 6 characters each, ``\uFFFE``): where a line would, libyaml folds a
#: double-quoted scalar differently from PyYAML's emitter.
C_EMITTER_CHARS = 1_000
#: A character outside the Basic Multilingual Plane: libyaml escapes them (``"\U0001F600"``),
#: PyYAML's emitter writes them as they are.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
#: The most characters a number (a float's repr), a boolean or null takes in YAML.
_SCALAR_CHARS = 24


def _c_emittable(data: dict[str, Any]) -> bool:
    """Whether libyaml writes `data` exactly as PyYAML's emitter does: at most `C_EMITTER_CHARS`
    characters of keys, strings and other values, none outside the BMP (tests/processes/test_docmodel.py
    compares the two). Stops at the bound, so it costs at most that many steps."""
    room = C_EMITTER_CHARS
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            room -= len(value)
            if room < 0 or _ASTRAL.search(value):
                return False
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            room -= len(value)
            if room < 0:
                return False
            stack.extend(value)
        else:  # a number, a boolean, None: at most `_SCALAR_CHARS` characters written
            room -= _SCALAR_CHARS
            if room < 0:
                return False
    return True


class RenderedFrontmatter:
    """The YAML of the frontmatters rendered last, keyed by ``repr`` of the frontmatter dict
    (`ProcessDoc.frontmatter`), at most `size` of them, the least recently used going first.

    Only a frontmatter of builtin strings, numbers, booleans, None, lists and dicts of them
    (`_builtin_only`: what parsing and the stored rows give) is cached, and the ``repr`` of such a
    value is the value exactly: its types (``1``, ``1.0``, ``True``, ``'1'`` apart), every
    character, and each dict's key order, which the dump keeps. Two frontmatters with one
    ``repr`` therefore render to one text, and a document changed in any field (its counts,
    ``updated``, an extra key) is a new key: an entry is never stale, only unused.

    The pure-Python representer PyYAML runs even under libyaml's emitter is most of a small
    document's render, and a fleet's robots are shown the same few documents again and again.
    Thread-safe: documents render on the event loop and on the documents lane."""

    def __init__(self, size: int = 2048) -> None:
        self.size = size
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            text = self._texts.get(key)
            if text is not None:
                self._texts.move_to_end(key)
            return text

    def put(self, key: str, text: str) -> None:
        with self._lock:
            self._texts[key] = text
            self._texts.move_to_end(key)
            while len(self._texts) > self.size:
                self._texts.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._texts)


_RENDERED = RenderedFrontmatter()
_BUILTIN_SCALARS = (str, int, float, bool, type(None))


def _builtin_only(data: dict[str, Any]) -> bool:
    """Whether `data` holds nothing but builtin scalars, lists and dicts (exact types, not
    subclasses, whose ``repr`` may hide what they are)."""
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is dict:
            stack.extend(value.keys())
            stack.extend(value.values())
        elif kind is list:
            stack.extend(value)
        elif kind not in _BUILTIN_SCALARS:
            return False
    return True


def _lf(text: str) -> str:
    """Every line ending as LF: CRLF and a lone CR are line endings in markdown as in YAML."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def slugify(title: str) -> str:
    """A kebab-case id from a title; titles with no Latin letters get a stable hashed id."""
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:80].strip("-")
    if not slug:
        slug = f"process-{zlib.crc32(title.encode()):08x}"
    return slug


class ProcessDoc(BaseModel):
    """One process document. Timestamps are ISO-8601 UTC strings (``2026-06-12T14:00:00Z``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(max_length=MAX_ID)
    title: str = Field(min_length=1, max_length=MAX_TITLE)
    task_pattern: str = Field(default="", max_length=2000)
    tags: tuple[str, ...] = Field(default=(), max_length=50)
    robot: str = Field(default="unknown", max_length=64)
    created: str = ""
    updated: str = ""
    success_count: int = Field(default=0, ge=0, le=10**9)
    failure_count: int = Field(default=0, ge=0, le=10**9)
    last_used: str = ""
    source_mission_id: str = Field(default="", max_length=200)
    extra: dict[str, Any] = Field(default_factory=dict)
    body: str = Field(default="", max_length=MAX_BODY)

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG_RE.match(v):
            raise ValueError(
                "must be a kebab-case slug: lowercase letters and digits separated by single hyphens, "
                "e.g. fetch-package-mailroom"
            )
        return v

    @field_validator("body")
    @classmethod
    def _body(cls, v: str) -> str:
        v = _lf(v).strip("\n")
        return v + "\n" if v else ""

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for t in v:
            if not t or len(t) > 64 or "\n" in t:
                raise ValueError("each tag must be 1-64 characters on one line")
        return v

    @field_validator("extra")
    @classmethod
    def _extra(cls, v: dict[str, Any]) -> dict[str, Any]:
        clash = sorted(set(v).intersection(_KNOWN))
        if clash:
            raise ValueError(f"extra keys may not reuse a frontmatter field name: {', '.join(clash)}")
        return v

    @field_validator("robot")
    @classmethod
    def _robot(cls, v: str) -> str:
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$", v):
            raise ValueError("must be a robot id: letters, digits, '_', '.', ':' or '-'")
        return v

    @property
    def reliability(self) -> float:
        return reliability(self.success_count, self.failure_count)

    def frontmatter(self) -> dict[str, Any]:
        """The frontmatter as a plain dict (no body), known keys first."""
        data: dict[str, Any] = {k: getattr(self, k) for k in _KNOWN}
        data["tags"] = list(self.tags)
        for k in sorted(self.extra):
            data[k] = self.extra[k]
        return data

    def render(self) -> str:
        """The markdown document: ``---`` YAML frontmatter ``---`` then the body."""
        data = self.frontmatter()
        key = repr(data)
        fm = _RENDERED.get(key)
        if fm is None:
            # The same text either way (`_c_emittable`); libyaml's emitter in a fraction of the time.
            fast = _CDumper is not None and _c_emittable(data)
            fm = yaml.dump(
                data,
                Dumper=_CDumper if fast else _Dumper,
                sort_keys=False,
                allow_unicode=True,
                default_flow_style=None,
                width=10_000,
            )
            if fast and _builtin_only(data):  # bounded by `C_EMITTER_CHARS`, so the cache's size is too
                _RENDERED.put(key, fm)
        body = self.body
        return f"---\n{fm}---\n\n{body}" if body else f"---\n{fm}---\n"


#: What `cheap_to_render` allows: a frontmatter this small renders in less time than the hop to
#: the documents lane and back costs, so it renders on the event loop.
CHEAP_RENDER_BUDGET = 400


def cheap_to_render(doc: ProcessDoc) -> bool:
    """Whether `doc.render()` is cheap enough for an event loop: its frontmatter holds at most
    `CHEAP_RENDER_BUDGET` values, a string counting one per 100 characters (PyYAML's emitter
    looks at each character in Python). Stops counting at the budget, so it costs at most that
    many steps however large a document stored before the frontmatter limits is."""
    budget = CHEAP_RENDER_BUDGET - len(doc.tags) - (len(doc.title) + len(doc.task_pattern)) // 100
    stack: list[Any] = [doc.extra]
    while stack:
        value = stack.pop()
        budget -= 1 + (len(value) // 100 if isinstance(value, str) else 0)
        if budget < 0:
            return False
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return True


def reliability(success: int, failure: int) -> float:
    """Laplace-smoothed success rate: (s + 1) / (s + f + 2)."""
    return (success + 1) / (success + failure + 2)


def parse(text: str, *, default_robot: str = "unknown", bounded: bool = True) -> ProcessDoc:
    """Parse and validate a markdown process document.

    Raises `DocumentParseError` naming the line (for YAML problems) or the field (for validation
    problems) and what to do about it. `bounded` applies the frontmatter limits
    (`check_frontmatter`); only an operator's load of its own dump turns them off, so a document
    stored before the limits existed loads back as it was dumped.
    """
    if not isinstance(text, str):
        raise DocumentParseError("the document must be a markdown string")
    if len(text) > MAX_DOCUMENT:
        raise DocumentParseError(f"the document is {len(text)} characters; the limit is {MAX_DOCUMENT}")
    text = _lf(text).lstrip("\ufeff")
    lines = text.split("\n")
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None or lines[first].strip() != "---":
        raise DocumentParseError(
            "a process document starts with YAML frontmatter between '---' lines "
            "(at least 'title:'), followed by the markdown body",
            line=1 if first is None else first + 1,
        )
    # The closing line is '---' at the start of a line: an indented '---' is part of a
    # multi-line YAML value (a title or note may contain one), not the end of the frontmatter.
    end = next((i for i in range(first + 1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise DocumentParseError("the frontmatter is not closed: add a '---' line after it", line=first + 1)
    fm_text = "\n".join(lines[first + 1 : end])
    if bounded:
        check_frontmatter(fm_text, first_line=first + 2)
    try:
        raw = yaml.load(fm_text, Loader=_Loader) if fm_text.strip() else {}  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first + 2 + mark.line if mark is not None else first + 1
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise DocumentParseError(f"the frontmatter is not valid YAML: {problem}", line=line) from exc
    except (ValueError, OverflowError, RecursionError) as exc:  # a date like 2026-02-30, a 5,000-digit number
        raise DocumentParseError(
            "the frontmatter holds a value that cannot be read (an impossible date, a number too long, "
            "nesting too deep): quote it to keep it as text",
            line=first + 1,
        ) from exc
    if not isinstance(raw, dict):
        raise DocumentParseError("the frontmatter must be a YAML mapping of keys to values", line=first + 2)
    _check_text(raw)
    body = "\n".join(lines[end + 1 :]).strip("\n")
    body = body + "\n" if body else ""
    return from_frontmatter(raw, body, default_robot=default_robot)


#: What the shape scan looks at: flow-collection brackets (nesting) and the line structure.
_FLOW = re.compile(r"[\[\]{}]")
_INDICATORS = re.compile(r"(?:[-?](?: +|\Z))+")


def check_frontmatter(fm_text: str, *, first_line: int = 2) -> None:
    """`DocumentParseError` naming the limit when the frontmatter (the text between the ``---``
    lines, whose first line is `first_line` of the document) is larger, holds more entries or
    nests deeper than the limits allow. One linear pass, no YAML: an entry is a non-blank line or
    a ``,`` ``[`` ``{`` (what separates values in flow style), so the count bounds the values a
    loader would build; the depth of a line is how many enclosing lines are less indented, plus
    its leading ``-``/``?`` indicators, plus the flow brackets open around it — a bound on YAML's
    nesting that can only over-count (a bracket inside a quoted string counts)."""
    if len(fm_text) > MAX_FRONTMATTER:
        raise DocumentParseError(
            f"the frontmatter is {len(fm_text)} characters; its limit is {MAX_FRONTMATTER} (the whole document's "
            f"is {MAX_DOCUMENT}): keep the frontmatter to short fields and move long content into the markdown body",
            line=first_line,
        )
    entries = sum(1 for ln in fm_text.split("\n") if ln.strip()) + sum(map(fm_text.count, ",[{"))
    if entries > MAX_FRONTMATTER_ENTRIES:
        raise DocumentParseError(
            f"the frontmatter holds about {entries} entries (lines and ',' '[' '{{' separators); its limit is "
            f"{MAX_FRONTMATTER_ENTRIES}: move long lists into the markdown body",
            line=first_line,
        )
    indents: list[int] = []
    flow = 0
    for n, ln in enumerate(fm_text.split("\n")):
        text = ln.lstrip(" ")
        if not text.strip() or text.startswith("#"):
            continue
        width = len(ln) - len(text)
        while indents and indents[-1] >= width:
            indents.pop()
        indents.append(width)
        lead = _INDICATORS.match(text)
        block = len(indents) + (lead.group().count("-") + lead.group().count("?") if lead else 0)
        deepest = flow
        for m in _FLOW.finditer(text):
            flow = flow + 1 if m.group() in "[{" else max(0, flow - 1)
            deepest = max(deepest, flow)
        if block + deepest > MAX_FRONTMATTER_DEPTH:
            raise DocumentParseError(
                f"the frontmatter nests deeper than {MAX_FRONTMATTER_DEPTH} levels: flatten it, or move the "
                "structure into the markdown body",
                line=first_line + n,
            )


def from_frontmatter(raw: dict[Any, Any], body: str, *, default_robot: str = "unknown") -> ProcessDoc:
    data: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    seen: set[str] = set()
    for key, value in raw.items():
        if key is None or isinstance(key, bool | list | dict):
            raise DocumentParseError("frontmatter keys must be names (a key here is null or not text)")
        k = _iso(key) if isinstance(key, dt.date) else str(key)
        if k in seen:  # 1: a and '1': b are one key once stored
            raise DocumentParseError("a frontmatter key appears twice", field=k)
        seen.add(k)
        if k in _KNOWN:
            data[k] = value
        else:
            extra[k] = _plain(value, k)
    for k in ("created", "updated", "last_used"):
        if data.get(k) is None:
            data.pop(k, None)
        else:
            try:
                data[k] = _iso(data[k])
            except (OverflowError, ValueError) as exc:  # 0001-01-01 00:00:00+01:00 is before year 1 in UTC
                raise DocumentParseError("a date out of range; use years 1-9999 in UTC", field=k) from exc
    for k in ("title", "task_pattern", "robot", "source_mission_id"):
        if k in data and data[k] is not None and not isinstance(data[k], str):
            data[k] = _iso(data[k]) if isinstance(data[k], dt.date) else str(data[k])
        if k in data and data[k] is None:
            data.pop(k)
    if "title" not in data:
        # Checked before the model so a bare document is told about 'title', not the derived 'id'.
        raise DocumentParseError(_explain({"type": "missing"}), field="title")
    if "id" in data and data["id"] is not None:
        data["id"] = str(data["id"])
    else:
        data["id"] = slugify(str(data["title"]))
    tags = data.get("tags")
    if tags is None:
        data.pop("tags", None)
    elif isinstance(tags, str):
        data["tags"] = tuple(t.strip() for t in tags.split(",") if t.strip())
    elif isinstance(tags, list):
        data["tags"] = tuple(str(t) for t in tags)
    if "robot" not in data:
        data["robot"] = default_robot
    data["extra"] = extra
    data["body"] = body
    try:
        return ProcessDoc(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or None
        raise DocumentParseError(_explain(err), field=loc) from exc


def _explain(err: Any) -> str:
    msg = str(err.get("msg", "invalid value"))
    kind = err.get("type", "")
    if kind == "missing":
        return "missing required key: add it to the frontmatter (a process needs at least 'title')"
    if kind == "extra_forbidden":
        return "unknown key"
    return msg.removeprefix("Value error, ")


def _plain(value: Any, key: str) -> Any:
    """Extra frontmatter values must survive JSON storage: normalise dates (at any depth — an
    unquoted date inside a list is as common as one at the top) and mapping keys (to strings, as
    JSON has them), refuse the rest."""
    try:
        value = _dates_to_iso(value)
        json.dumps(value, sort_keys=True)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise DocumentParseError("value cannot be stored; use plain strings, numbers and lists", field=key) from exc
    return value


def _dates_to_iso(value: Any) -> Any:
    if isinstance(value, dt.date):
        return _iso(value)
    if isinstance(value, list):
        return [_dates_to_iso(v) for v in value]
    if isinstance(value, dict):
        if any(k is None or isinstance(k, bool | float | list | dict) for k in value):
            raise ValueError("keys must be names")  # null:, true:, 1.5: would each be renamed
        out = {(_iso(k) if isinstance(k, dt.date) else str(k)): _dates_to_iso(v) for k, v in value.items()}
        if len(out) != len(value):  # {1: a, '1': b}: two keys that are one in JSON
            raise ValueError("duplicate keys")
        return out
    return value


def _check_text(value: Any) -> None:
    """`DocumentParseError` when a string anywhere in the frontmatter cannot be stored as UTF-8
    (YAML's ``"\\udc00"`` escape makes a lone surrogate)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise DocumentParseError(
                    "the frontmatter holds a lone surrogate (\\ud800-\\udfff): send UTF-8 text"
                ) from exc
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


# ---------------------------------------------------------------------------- the outcome log
#: One line of ``## Outcome log``: date, flag, the robot (and group) when a robot token recorded
#: it, then the note. Lines without the parenthesis are the document's own (an operator's, or
#: written before outcomes were attributed).
_LOG_LINE = re.compile(r"^-\s+(\S+)\s+(success|failure)(?:\s+\(robot ([^,()\s]+)(?:, group ([^()]+?))?\))?:\s?(.*)$")


@dataclass(frozen=True)
class OutcomeEntry:
    """One recorded outcome of a process (a row of `process_outcomes`).

    `tenant` is ``group:<G>`` or ``solo:<robot>`` when a robot token recorded it ('' for an
    unscoped caller or a line whose author is not known); `robot` names the robot then, the
    caller's kind (``admin``, ``stdio``, …) for an unscoped caller, and '' when not known."""

    when: str
    success: bool
    note: str = ""
    robot: str = ""
    tenant: str = ""

    @property
    def group(self) -> str:
        return self.tenant.removeprefix("group:") if self.tenant.startswith("group:") else ""

    def line(self) -> str:
        who = ""
        if self.tenant:
            who = f" (robot {self.robot}, group {self.group})" if self.group else f" (robot {self.robot})"
        return f"- {self.when} {'success' if self.success else 'failure'}{who}: {' '.join(self.note.split())}"


def split_outcome_log(body: str) -> tuple[str, list[OutcomeEntry]]:
    """The body without its ``## Outcome log`` section (heading to the next heading), and the
    section's entries, oldest first. An entry attributed to a robot comes back with its robot
    and tenant, as `OutcomeEntry.line` wrote them."""
    lines = body.split("\n")
    kept: list[str] = []
    entries: list[OutcomeEntry] = []
    inside = False
    for line in lines:
        if line.strip() == OUTCOME_HEADING:
            inside = True
            continue
        if inside and line.startswith("#"):
            inside = False
        if not inside:
            kept.append(line)
            continue
        m = _LOG_LINE.match(line.strip())
        if m:
            when, flag, robot, group, note = m.groups()
            tenant = "" if robot is None else (f"group:{group}" if group else f"solo:{robot}")
            entries.append(OutcomeEntry(when, flag == "success", note, robot or "", tenant))
    rest = "\n".join(kept).strip("\n")
    return (rest + "\n" if rest else ""), entries


def with_outcome_log(body: str, entries: list[OutcomeEntry]) -> str:
    """`body` (without an outcome log) followed by ``## Outcome log`` and the entries that have
    a note, oldest first. The result stays within `MAX_BODY` — a rendered document can always be
    saved back — so the oldest lines give way first; they stay in the outcome history."""
    lines = [e.line() for e in entries if e.note.strip()]
    if not lines:
        return body
    head = body.rstrip("\n") + "\n\n" if body.strip() else ""
    room = MAX_BODY - len(head) - len(OUTCOME_HEADING) - 2
    keep = len(lines)
    size = 0
    while keep > 0 and size + len(lines[keep - 1]) + 1 <= room:
        size += len(lines[keep - 1]) + 1
        keep -= 1
    shown = lines[keep:]
    if not shown:
        return body
    return head + OUTCOME_HEADING + "\n" + "\n".join(shown) + "\n"
