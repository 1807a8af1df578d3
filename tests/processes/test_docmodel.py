"""ProcessDoc: the markdown wire format (spec §3) — round trip, validation, YAML 1.1 traps."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_mcp_memory.errors import DocumentParseError, InvalidInput
from robot_mcp_memory.processes import docmodel
from robot_mcp_memory.processes.docmodel import OUTCOME_HEADING, OutcomeEntry, ProcessDoc, parse, slugify
from tests.conftest import MAILROOM

EXAMPLES = settings(max_examples=200, deadline=None)
KNOWN = set(docmodel.ProcessDoc.model_fields) - {"extra", "body"}

# ---------------------------------------------------------------------------- strategies
slugs = st.from_regex(r"[a-z0-9]{1,12}(-[a-z0-9]{1,12}){0,4}", fullmatch=True)
robots = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}", fullmatch=True)
one_line = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\n"), min_size=1, max_size=40)
stamps = st.one_of(
    st.just(""),
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ")),
    st.text(max_size=30),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True), inner, max_size=4),
    ),
    max_leaves=10,
)
extra_keys = st.one_of(
    st.sampled_from(["content", "handler", "notes", "extra", "body"]),
    st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True),
).filter(lambda k: k not in KNOWN)

docs = st.builds(
    ProcessDoc,
    id=slugs,
    title=st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=60),
    task_pattern=st.text(max_size=80),
    tags=st.lists(one_line, max_size=6).map(tuple),
    robot=robots,
    created=stamps,
    updated=stamps,
    success_count=st.integers(0, 10**9),
    failure_count=st.integers(0, 10**9),
    last_used=stamps,
    source_mission_id=st.text(max_size=40),
    extra=st.dictionaries(extra_keys, json_values, max_size=5),
    body=st.text(max_size=400),
)


# ---------------------------------------------------------------------------- round trip
@EXAMPLES
@given(docs)
def test_a_rendered_document_parses_back_to_the_same_document(doc: ProcessDoc) -> None:
    rendered = doc.render()
    assert parse(rendered) == doc
    assert parse(rendered).render() == rendered


def _python_emitted(doc: ProcessDoc) -> str:
    """`doc.render()` as PyYAML's pure-Python emitter writes it: the reference for the C one."""
    fm = yaml.dump(
        doc.frontmatter(),
        Dumper=docmodel._Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=None,
        width=10_000,
    )
    return f"---\n{fm}---\n\n{doc.body}" if doc.body else f"---\n{fm}---\n"


# Strings of every sort libyaml and PyYAML might write apart: any code point (astral ones too),
# line breaks, quotes, escapes, long runs that reach the emitter's width.
_pieces = st.one_of(
    st.characters(exclude_categories=["Cs"]),
    st.sampled_from(["\n", "\x85", "\u2028", "\ufeff", "\x01", "'", '"', ": ", " #", "\\", " "]),
)
_LONG_PIECES = ("word ", "\x85", "\u2028", "é", "中", "\x01", "\n", "'")
awkward = st.lists(_pieces, max_size=40).map("".join) | st.builds(
    lambda n, seed: "".join(random.Random(seed).choice(_LONG_PIECES) for _ in range(n)),
    st.integers(250, 1000),
    st.integers(0, 2**32),
)


@settings(max_examples=40, deadline=None)
@given(
    docs,
    st.dictionaries(st.from_regex(r"x[a-z0-9_]{0,8}", fullmatch=True), awkward | st.lists(awkward, max_size=5)),
)
def test_a_document_renders_exactly_as_pythons_yaml_emitter_writes_it(doc: ProcessDoc, more: dict[str, Any]) -> None:
    doc = doc.model_copy(update={"extra": {**doc.extra, **more}})
    assert doc.render() == _python_emitted(doc)


def test_every_sort_of_character_renders_as_pythons_yaml_emitter_writes_it() -> None:
    sample = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF and (c < 0x3000 or c % 13 == 0)]
    points = [*sample[::5], *range(0x80, 0xA0), 0xFEFF, 0xFFFE, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF]
    for start in range(0, len(points), 16):  # each value a scalar of its own: styles are chosen per scalar
        chars = [chr(cp) for cp in points[start : start + 16]]
        extra = {f"k{n}": [c, f"a{c}b", f"{c} {c}:"] for n, c in enumerate(chars)}
        doc = ProcessDoc(id="x", title=f"a{chars[0]}b", task_pattern=chars[-1], extra=extra)
        assert doc.render() == _python_emitted(doc), [hex(ord(c)) for c in chars]


@pytest.mark.skipif(
    docmodel._CDumper is None,
    reason="PyYAML was built without libyaml: install a PyYAML wheel built with it (the PyPI wheels are)",
)
def test_a_small_frontmatter_is_rendered_by_libyaml_not_by_pythons_emitter(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = parse(MAILROOM)
    emitted: list[yaml.events.Event] = []
    real = yaml.emitter.Emitter.emit

    def counted(self: yaml.emitter.Emitter, event: yaml.events.Event) -> None:
        emitted.append(event)
        real(self, event)

    monkeypatch.setattr(yaml.emitter.Emitter, "emit", counted)
    assert doc.render() == _python_emitted(doc)
    assert emitted  # the reference went through PyYAML's emitter …
    emitted.clear()
    doc.render()
    assert emitted == []  # … the render did not

    huge = doc.model_copy(update={"extra": {"notes": "word " * 300}})
    huge.render()
    assert emitted  # past the bound, the Python emitter writes it: libyaml folds long lines otherwise


def _no_yaml(*_args: object, **_kwargs: object) -> str:
    raise AssertionError("rendered with PyYAML, not from the cache")


def test_a_document_rendered_before_renders_from_the_cache_and_a_changed_one_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = parse(MAILROOM)
    rendered = doc.render()
    monkeypatch.setattr(yaml, "dump", _no_yaml)
    assert doc.render() == rendered
    assert doc.model_copy(update={"body": "other steps\n"}).render().startswith(rendered.split("\n\n")[0])
    for changed in ({"success_count": doc.success_count + 1}, {"updated": "2026-12-02T00:00:00Z"}, {"extra": {"k": 1}}):
        with pytest.raises(AssertionError, match="not from the cache"):
            doc.model_copy(update=changed).render()


def test_frontmatters_that_differ_only_in_a_values_type_or_key_order_render_apart() -> None:
    doc = parse(MAILROOM)
    values: list[Any] = [
        1,
        1.0,
        True,
        "1",
        [1],
        None,
        "None",
        "true",
        0,
        False,
        -0.0,
        0.0,
        {"a": 1, "b": 2},
        {"b": 2, "a": 1},
    ]
    for value in values:
        variant = doc.model_copy(update={"extra": {"x": value}})
        assert variant.render() == _python_emitted(variant), value
    for value in values:  # again, the cache now holding every one of them
        variant = doc.model_copy(update={"extra": {"x": value}})
        assert variant.render() == _python_emitted(variant), value


class _Word(str):
    """A str subclass: its ``repr`` is a plain string's, which a cache key must not trust."""


def test_a_frontmatter_holding_anything_but_builtin_values_is_not_cached() -> None:
    doc = parse(MAILROOM).model_copy(update={"extra": {"x": ["plain", {"k": 2.5}]}})
    assert docmodel._builtin_only(doc.frontmatter())
    odd = doc.model_copy(update={"extra": {"x": ["plain", {"k": _Word("w")}]}})
    assert not docmodel._builtin_only(odd.frontmatter())
    before = len(docmodel._RENDERED)
    with pytest.raises(yaml.representer.RepresenterError):
        odd.render()  # SafeDumper refuses the subclass, as it did before the cache
    assert len(docmodel._RENDERED) == before


def test_the_render_cache_keeps_the_most_recently_used_entries_up_to_its_size() -> None:
    cache = docmodel.RenderedFrontmatter(size=2)
    cache.put("a", "A")
    cache.put("b", "B")
    assert cache.get("a") == "A"  # "a" is now the most recently used
    cache.put("c", "C")
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == ("A", None, "C", 2)


def test_the_spec_mailroom_example_parses_and_renders_stably() -> None:
    doc = parse(MAILROOM)

    assert doc.id == "fetch-package-mailroom"
    assert doc.title == "Fetch a package from the mailroom"
    assert doc.tags == ("delivery", "mailroom")
    assert (doc.robot, doc.source_mission_id) == ("g1-lab-01", "m-9af31c")
    assert (doc.success_count, doc.failure_count) == (3, 1)
    assert (doc.created, doc.updated, doc.last_used) == (
        "2026-06-12T14:00:00Z",
        "2026-06-12T14:00:00Z",
        "2026-06-12T16:20:00Z",
    )
    assert doc.body == MAILROOM.split("---\n", 2)[2].lstrip("\n")
    assert doc.extra == {}
    rendered = doc.render()
    assert parse(rendered) == doc
    assert parse(rendered).render() == rendered


# ---------------------------------------------------------------------------- invalid documents
@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param("", 1, id="empty"),
        pytest.param("## Steps\n1. go\n", 1, id="no-frontmatter"),
        pytest.param("\n\ntitle: x\n---\n", 3, id="frontmatter-without-opening-line"),
        pytest.param("---\ntitle: x\n\n## Steps\n", 1, id="unclosed"),
        pytest.param("---\ntitle: x\ntags: [a, b\n---\n", 3, id="bad-yaml"),
        pytest.param("---\ntitle: x\n  robot: : y\n---\n", 3, id="bad-yaml-indent"),
        pytest.param("---\n- title\n- x\n---\n", 2, id="a-list-not-a-mapping"),
        pytest.param("---\njust a sentence\n---\n", 2, id="a-string-not-a-mapping"),
        pytest.param("---\ntitle: x\nobj: !!python/object:os.system {}\n---\n", 3, id="unsafe-tag"),
    ],
)
def test_a_malformed_document_is_refused_with_the_line(text: str, line: int) -> None:
    with pytest.raises(DocumentParseError) as caught:
        parse(text)
    assert caught.value.code == "invalid"
    assert isinstance(caught.value, InvalidInput)
    assert caught.value.line == line


@pytest.mark.parametrize(
    ("front", "field"),
    [
        pytest.param("id: abc", "title", id="missing-title"),
        pytest.param("title:", "title", id="empty-title"),
        pytest.param("id: Fetch_Package\ntitle: x", "id", id="slug-with-capitals-and-underscore"),
        pytest.param("id: fetch--package\ntitle: x", "id", id="slug-with-double-hyphen"),
        pytest.param("id: -fetch\ntitle: x", "id", id="slug-with-leading-hyphen"),
        pytest.param("title: x\nsuccess_count: -1", "success_count", id="negative-success"),
        pytest.param("title: x\nfailure_count: -3", "failure_count", id="negative-failure"),
        pytest.param("title: x\nsuccess_count: many", "success_count", id="non-numeric-count"),
        pytest.param("title: x\nrobot: not a robot id", "robot", id="bad-robot"),
        pytest.param("title: x\nblob: !!binary aGVsbG8=", "blob", id="extra-value-not-storable"),
    ],
)
def test_an_invalid_frontmatter_value_is_refused_with_the_field(front: str, field: str) -> None:
    with pytest.raises(DocumentParseError) as caught:
        parse(f"---\n{front}\n---\n\nbody\n")
    assert caught.value.code == "invalid"
    assert caught.value.field is not None
    assert caught.value.field.split(".")[0] == field


def test_a_slug_must_be_kebab_case() -> None:
    with pytest.raises(ValueError, match="kebab-case"):
        ProcessDoc(id="Fetch_Package", title="x")


def test_extra_keys_cannot_shadow_a_frontmatter_field() -> None:
    with pytest.raises(ValueError, match="title"):
        ProcessDoc(id="a", title="x", extra={"title": "y"})


# ---------------------------------------------------------------------------- YAML 1.1 traps
def test_unquoted_dates_become_iso_utc_strings() -> None:
    doc = parse(
        "---\n"
        "title: x\n"
        "created: 2026-06-12T16:00:00+02:00\n"
        "updated: 2026-06-12\n"
        "last_used: 2026-06-12 16:20:00\n"
        "reviewed: 2026-06-01\n"
        "visits: [2026-06-02, {on: 2026-06-03}]\n"
        "---\n"
    )
    assert (doc.created, doc.updated, doc.last_used) == (
        "2026-06-12T14:00:00Z",
        "2026-06-12T00:00:00Z",
        "2026-06-12T16:20:00Z",
    )
    assert doc.extra == {
        "reviewed": "2026-06-01T00:00:00Z",
        "visits": ["2026-06-02T00:00:00Z", {"on": "2026-06-03T00:00:00Z"}],
    }
    assert parse(doc.render()) == doc


def test_yes_no_on_off_stay_words_and_only_true_false_are_booleans() -> None:
    doc = parse("---\ntitle: no\ntags: [yes, off, on]\nreviewed: true\nsigned_off: n\n---\n")
    assert doc.title == "no"
    assert doc.id == "no"
    assert doc.tags == ("yes", "off", "on")
    assert doc.extra == {"reviewed": True, "signed_off": "n"}
    assert parse(doc.render()) == doc


def test_keys_named_content_and_handler_are_kept_as_extra_keys() -> None:
    doc = parse("---\ntitle: x\ncontent: the shelf\nhandler: reception\n---\n\nbody\n")
    assert doc.extra == {"content": "the shelf", "handler": "reception"}
    assert doc.body == "body\n"
    rendered = doc.render()
    assert "content: the shelf" in rendered
    assert "handler: reception" in rendered
    assert parse(rendered) == doc


def test_a_title_containing_a_dashed_line_does_not_end_the_frontmatter() -> None:
    doc = ProcessDoc(id="a", title="before\n---\nafter", extra={"note": "x\n---\ny"}, body="## Steps\n---\n")
    assert parse(doc.render()) == doc


def test_tags_may_be_a_comma_separated_string() -> None:
    assert parse("---\ntitle: x\ntags: delivery, mailroom\n---\n").tags == ("delivery", "mailroom")


def test_windows_line_endings_are_accepted() -> None:
    assert parse(MAILROOM.replace("\n", "\r\n")) == parse(MAILROOM)


# ---------------------------------------------------------------------------- ids
def test_a_missing_id_is_derived_from_the_title() -> None:
    doc = parse("---\ntitle: Fetch a Package — from the Mail-Room!\n---\n")
    assert doc.id == "fetch-a-package-from-the-mail-room"


def test_an_accented_title_slugifies_to_ascii() -> None:
    assert slugify("Café Crème à l'étage") == "cafe-creme-a-l-etage"


def test_a_cjk_only_title_gets_a_stable_hashed_id() -> None:
    first = parse("---\ntitle: 从邮件室取包裹\n---\n").id
    again = parse("---\ntitle: 从邮件室取包裹\n---\n").id
    other = parse("---\ntitle: 把包裹送到前台\n---\n").id
    assert re.fullmatch(r"process-[0-9a-f]{8}", first)
    assert first == again
    assert other != first


@EXAMPLES
@given(st.text(min_size=1, max_size=300))
def test_slugify_always_returns_a_valid_id(title: str) -> None:
    pid = slugify(title)
    assert docmodel.SLUG_RE.match(pid)
    assert len(pid) <= docmodel.MAX_ID


# ---------------------------------------------------------------------------- outcome log
def test_the_outcome_log_is_rendered_at_the_end_with_each_note_on_one_line() -> None:
    body = "## Steps\n1. go\n"
    out = docmodel.with_outcome_log(body, [OutcomeEntry("2026-06-12T16:20:00Z", True, "parcel  was\non the shelf")])
    assert out == f"## Steps\n1. go\n\n{OUTCOME_HEADING}\n- 2026-06-12T16:20:00Z success: parcel was on the shelf\n"


def test_an_outcome_log_on_an_empty_body_starts_with_the_section_and_bare_outcomes_are_not_lines() -> None:
    entries = [OutcomeEntry("T", False, "door closed"), OutcomeEntry("T2", True, "")]
    assert docmodel.with_outcome_log("", entries) == f"{OUTCOME_HEADING}\n- T failure: door closed\n"
    assert docmodel.with_outcome_log("## Steps\n", entries[1:]) == "## Steps\n"


def test_splitting_takes_the_log_out_from_its_heading_to_the_next_section() -> None:
    body = f"## Steps\n1. go\n\n{OUTCOME_HEADING}\n- T1 success: ok\n\n## Operator notes\n- lower shelf\n"
    rest, entries = docmodel.split_outcome_log(body)
    assert rest == "## Steps\n1. go\n\n## Operator notes\n- lower shelf\n"
    assert entries == [OutcomeEntry("T1", True, "ok")]


def test_a_rendered_outcome_log_survives_the_round_trip() -> None:
    doc = parse(MAILROOM)
    updated = doc.model_copy(update={"body": docmodel.with_outcome_log(doc.body, [OutcomeEntry("T", True, "fine")])})
    again = parse(updated.render())
    assert again == updated
    assert again.body.rstrip().endswith("- T success: fine")


def _frontmatter_of(doc: ProcessDoc) -> dict[str, Any]:
    return doc.frontmatter()


def test_frontmatter_lists_known_keys_first_then_extra_keys_sorted() -> None:
    doc = ProcessDoc(id="a", title="x", extra={"zeta": 1, "alpha": 2})
    keys = list(_frontmatter_of(doc))
    assert keys[: len(KNOWN)] == [k for k in ProcessDoc.model_fields if k in KNOWN]
    assert keys[len(KNOWN) :] == ["alpha", "zeta"]


frontmatter_lines = st.lists(
    st.one_of(
        st.text(max_size=20),
        st.sampled_from(
            [
                "title: x",
                "id: a-b",
                "tags: [a",
                "tags: 5",
                "---",
                "created: 2026-01-01",
                "x: !!binary aGk=",
                "? [a]\n: b",
                "success_count: 1e400",
                "id: [a]",
                "title: 2026-01-01",
                "robot: 12",
                "{2026-01-01: x}: 1",
            ]
        ),
    ),
    max_size=8,
)


@EXAMPLES
@given(frontmatter_lines)
def test_parse_refuses_any_text_with_document_parse_error_or_returns_a_renderable_doc(lines: list[str]) -> None:
    text = "---\n" + "\n".join(lines) + "\n---\nbody"
    try:
        doc = parse(text)
    except DocumentParseError:
        return
    assert parse(doc.render()) == doc


# ---------------------------------------------------------------------------- hostile frontmatter (found by review)
def test_yaml_aliases_are_refused_so_a_small_document_cannot_expand_to_millions_of_values() -> None:
    levels = "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 7))
    bomb = f"---\ntitle: bomb\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n{levels}---\nbody\n"
    with pytest.raises(DocumentParseError, match="aliases"):
        parse(bomb)
    assert parse("---\ntitle: anchored\nx: &only 5\n---\nbody\n").extra == {"x": 5}  # an anchor alone is harmless


@pytest.mark.parametrize(
    "frontmatter",
    [
        "created: 0001-01-01 00:00:00+01:00",  # before year 1 in UTC
        "x: 9999-12-31 23:59:59-01:00",  # after year 9999 in UTC
        "last_used: 2026-02-30",  # no such day
        "x: {1: a, '1': b}",  # one key in JSON
        "x: 1" + "0" * 5000,  # past Python's integer-string limit
        'x: "\\udc00"',  # YAML's escape for a lone surrogate
        'tags: ["\\ud800"]',
    ],
)
def test_frontmatter_values_that_cannot_be_stored_are_parse_errors(frontmatter: str) -> None:
    """Each was a 500 from save_process; it is the document's fault and says so."""
    with pytest.raises(DocumentParseError):
        parse(f"---\ntitle: t\n{frontmatter}\n---\nbody\n")


def test_an_id_ending_in_a_newline_is_not_a_slug() -> None:
    """``$`` matches before a final newline: ``"proc-b\\n"`` was saved and could then never be
    read, changed or deleted."""
    with pytest.raises(DocumentParseError, match="kebab-case"):
        parse('---\ntitle: t\nid: "proc-b\\n"\n---\nbody\n')


def test_the_outcome_log_keeps_the_body_within_its_limit() -> None:
    """40 long notes on a 195 kB body grew it past what save_process accepts (found by review):
    the oldest log lines give way, the newest is kept."""
    body = "## Steps\n" + "x" * 195_000 + "\n"
    notes = [OutcomeEntry(f"2026-11-{i % 28 + 1:02d}", True, f"note {i} " + "n" * 2000) for i in range(40)]
    out = docmodel.with_outcome_log(body, notes)
    assert len(out) <= docmodel.MAX_BODY
    assert "note 39 " in out
    assert "note 0 " not in out
    assert out.startswith(body)
    full = "## Steps\n" + "x" * (docmodel.MAX_BODY - 20) + "\n"
    assert docmodel.with_outcome_log(full, notes) == full  # no room: the records still hold them


@pytest.mark.parametrize("frontmatter", ["null: v", "1: a\n'1': b"])
def test_frontmatter_keys_that_would_change_silently_are_refused(frontmatter: str) -> None:
    """A null key was stored as "None"; two keys that are one in JSON kept only the last."""
    with pytest.raises(DocumentParseError):
        parse(f"---\ntitle: t\n{frontmatter}\n---\nbody\n")


def test_keys_json_would_rename_are_refused_at_any_depth() -> None:
    with pytest.raises(DocumentParseError):
        parse("---\ntitle: t\nx: {null: 1, true: 2}\n---\nbody\n")


# ---------------------------------------------------------------------------- frontmatter limits
def _with_frontmatter(front: str, body: str = "body") -> str:
    return f"---\ntitle: t\n{front}\n---\n\n{body}\n"


def test_a_frontmatter_over_its_size_limit_is_refused_before_yaml_reads_it() -> None:
    # Broken YAML at the end: a refusal naming the limit (not the syntax error) means the size
    # was checked before the loader ran.
    filler = "notes: " + "x" * docmodel.MAX_FRONTMATTER + "\nbroken: [unclosed"
    with pytest.raises(DocumentParseError) as caught:
        parse(_with_frontmatter(filler))
    assert caught.value.line == 2
    assert str(docmodel.MAX_FRONTMATTER) in caught.value.detail


@pytest.mark.parametrize(
    "front",
    [
        "log:\n" + "- 1\n" * docmodel.MAX_FRONTMATTER_ENTRIES,
        "log: [" + "1," * docmodel.MAX_FRONTMATTER_ENTRIES + "1]",
        "log: {" + ", ".join(f"k{i}: 1" for i in range(docmodel.MAX_FRONTMATTER_ENTRIES)) + "}",
    ],
    ids=["block list", "flow list", "flow mapping"],
)
def test_a_frontmatter_with_too_many_entries_is_refused(front: str) -> None:
    assert len(front) < docmodel.MAX_FRONTMATTER  # within the size limit: the entry count refuses it
    with pytest.raises(DocumentParseError) as caught:
        parse(_with_frontmatter(front))
    assert str(docmodel.MAX_FRONTMATTER_ENTRIES) in caught.value.detail


@pytest.mark.parametrize(
    "front",
    [
        "deep: " + "[" * (docmodel.MAX_FRONTMATTER_DEPTH + 1) + "]" * (docmodel.MAX_FRONTMATTER_DEPTH + 1),
        "deep:\n" + "- " * (docmodel.MAX_FRONTMATTER_DEPTH + 1) + "a",
        "deep:\n" + "".join(" " * i + f"k{i}:\n" for i in range(docmodel.MAX_FRONTMATTER_DEPTH + 1)) + "  " * 30 + "x",
    ],
    ids=["flow", "dashes", "indentation"],
)
def test_a_frontmatter_nested_too_deep_is_refused_naming_the_line(front: str) -> None:
    with pytest.raises(DocumentParseError) as caught:
        parse(_with_frontmatter(front))
    assert str(docmodel.MAX_FRONTMATTER_DEPTH) in caught.value.detail
    assert caught.value.line is not None
    assert caught.value.line >= 3


def test_a_frontmatter_within_the_limits_still_parses_beside_a_body_at_its_own_limit() -> None:
    items = docmodel.MAX_FRONTMATTER_ENTRIES - 40
    depth = docmodel.MAX_FRONTMATTER_DEPTH - 3  # 'nested' is one level, each '[' another
    front = (
        "tags: [a, b]\nlog:\n"
        + "".join(f"- {i}\n" for i in range(items))
        + "nested: "
        + "[" * depth
        + "1"
        + "]" * depth
        + '\nnote: "commas, [brackets] and {braces} in a string, counted as entries only"'
    )
    body = "b" * (docmodel.MAX_BODY - 10)
    got = parse(_with_frontmatter(front, body))
    assert got.extra["log"] == list(range(items))
    assert len(got.body) == docmodel.MAX_BODY - 9


def test_a_document_stored_before_the_limits_parses_unbounded_and_round_trips() -> None:
    stored = ProcessDoc(id="big", title="Big", extra={"log": list(range(docmodel.MAX_FRONTMATTER_ENTRIES + 1))})
    with pytest.raises(DocumentParseError):
        parse(stored.render())
    assert parse(stored.render(), bounded=False) == stored


def test_only_a_small_frontmatter_counts_as_cheap_to_render() -> None:
    assert docmodel.cheap_to_render(parse(MAILROOM))
    assert docmodel.cheap_to_render(ProcessDoc(id="a", title="A", extra={"steps": list(range(100))}))
    assert not docmodel.cheap_to_render(ProcessDoc(id="b", title="B", extra={"log": list(range(20_000))}))
    assert not docmodel.cheap_to_render(ProcessDoc(id="c", title="C", extra={"note": "x" * 100_000}))
    assert not docmodel.cheap_to_render(ProcessDoc(id="d", title="D", extra={"m": {str(i): i for i in range(500)}}))
