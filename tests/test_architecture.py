"""The architecture, enforced as folder rules: these tests walk ``src/`` with `ast` (nothing is imported).

The tree (docs/architecture.md draws it)::

    errors config logs metrics jsonvalue json_object   cross-cutting
    app.py api.py                                       composition roots
    storage/  search/  tenancy/  operations/            shared machinery
    processes/ fleet/ lessons/ experiences/             one folder per domain; its storage adapters in
                                                        sqlite/ and postgres/
    surfaces/ (mcp/, web/, cli.py, serve.py)            the ways in

- Only storage adapters (a ``sqlite/`` or ``postgres/`` folder; the robotmem importer is one)
  import a database driver and hold SQL that writes; psycopg only in a ``postgres/`` folder.
- Nothing below the surfaces imports them; only the composition roots and the surfaces do.
- A domain's service and model never import a storage adapter (they take ports), and no module
  outside an adapter or the composition roots does.
- operations/ (the operator's use cases) imports neither a storage adapter nor the composition
  root: it takes its `ports.Installation`, which `app.Memory` is, and its adapter lives in
  ``operations/sqlite/``.
- An adapter folder never imports another backend's adapter folder (``postgres/`` nothing of any
  ``sqlite/``, and the reverse): what both backends share lives outside them (a domain's ports,
  rules and ranking; search/; storage/clock), but for `SHARED_ADAPTER_MODULES` (FTS5's tokenizer).
- storage/ and search/ know no domain (but `storage/sqlite/index_db.py`, which composes index.db from
  each domain's tables).
- Only the MCP adapter imports `mcp`; no module uses a private name of mcp, starlette or uvicorn
  outside `PRIVATE_DEBT`, which may only shrink.
- Only ``config.py`` reads the environment.
- No module reads an FTS5 table's private shadow tables (``_data``, ``_docsize``, ``_idx``,
  ``_content``): an accelerator is built on public interfaces (fts5vocab, tables of our own).

Each detector is also run on a few hand-written samples, so a guard that can no longer fail
does not pass silently.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE = "robot_mcp_memory"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE

#: Storage adapters (paths relative to the package, fnmatch patterns where `*` spans folders):
#: the only places allowed to hold write-shaped SQL or import a database driver.
STORAGE_MODULES: tuple[str, ...] = (
    "storage/sqlite/*",
    "*/sqlite/*",
    "storage/postgres/*",
    "*/postgres/*",
)
#: The folder names of storage adapters, one per backend.
ADAPTER_FOLDERS: tuple[str, ...] = ("sqlite", "postgres")
DRIVERS: tuple[str, ...] = ("sqlite3", "psycopg", "psycopg_pool")
#: PostgreSQL's driver, and the adapters that alone may import it.
PG_DRIVERS: tuple[str, ...] = ("psycopg", "psycopg_pool")
PG_MODULES: tuple[str, ...] = ("storage/postgres/*", "*/postgres/*")

#: The domains: each folder holds everything about it except how it is reached.
DOMAINS: tuple[str, ...] = ("processes", "fleet", "lessons", "experiences")

#: The ways in, and the modules that may import them.
SURFACES = "surfaces"
COMPOSITION_ROOTS: tuple[str, ...] = ("__main__.py",)

#: The composition root wires adapters to services: it may import both.
WIRING: tuple[str, ...] = ("app.py", "api.py", "surfaces/*")
#: The operator's use cases, and the composition roots they must not import (they are handed an
#: `operations.ports.Installation`).
OPERATIONS = "operations"
ROOTS: tuple[str, ...] = (f"{PACKAGE}.app", f"{PACKAGE}.api")

#: Shared machinery that knows no domain.
DOMAIN_FREE: tuple[str, ...] = ("storage/*", "search/*")
DOMAIN_FREE_EXCEPTIONS: tuple[str, ...] = ("storage/sqlite/index_db.py",)  # composes index.db's tables

#: The MCP adapter: the only modules that may import the `mcp` SDK. The tenancy middleware
#: builds the SDK's `AuthenticatedUser`, without which the SDK does not pin a session to its principal.
MCP_ADAPTER: tuple[str, ...] = ("surfaces/*", "tenancy/middleware.py")
#: Third-party packages whose private names we must not use.
SDKS: tuple[str, ...] = ("mcp", "starlette", "uvicorn")
#: Internal modules of the SDKs (no underscore, but not their public interface).
SDK_INTERNAL_MODULES: tuple[str, ...] = ("mcp.server.fastmcp.utilities", "uvicorn.protocols")
#: Modules that still reach into an SDK's internals: none. It may only shrink; keep it empty.
PRIVATE_DEBT: frozenset[str] = frozenset()

#: The only reader of the environment.
ENV_READER = "config.py"
#: Environment *writes* a third-party library needs before it is imported: (module, variable).
ENV_WRITES_FOR_LIBRARIES: frozenset[tuple[str, str]] = frozenset(
    {("search/embedders.py", "ORT_DISABLE_TELEMETRY")}  # onnxruntime >= 1.31 telemetry file (house style)
)
CLI = "surfaces/cli.py"

WRITE_SQL = re.compile(
    r"""^\s*(?:
        INSERT\s+(?:OR\s+\w+\s+)?INTO
      | REPLACE\s+INTO
      | UPDATE\s+(?:OR\s+\w+\s+)?\S+\s+SET
      | DELETE\s+FROM
      | CREATE\s+(?:(?:UNIQUE|VIRTUAL|TEMP|TEMPORARY)\s+)?(?:TABLE|INDEX|VIEW|TRIGGER)
      | DROP\s+(?:TABLE|INDEX|VIEW|TRIGGER)
      | ALTER\s+TABLE
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)


def _matches(rel: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(rel, p) for p in patterns)


@cache
def _modules() -> tuple[tuple[str, ast.Module], ...]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        found.append((rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
    assert found, f"no modules under {SRC}"
    return tuple(found)


# ---------------------------------------------------------------------------- detectors
def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def write_sql_literals(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of string literals (f-strings included) that begin with write-shaped SQL."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                skip.add(id(part))
            text = "".join(str(p.value) if isinstance(p, ast.Constant) else "x" for p in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        else:
            continue
        if WRITE_SQL.match(text):
            yield node.lineno, text.strip().splitlines()[0][:60]


def imported_modules(rel: str, tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import, relative ones resolved; for
    ``from a import b`` both ``a`` and ``a.b`` (b may be a submodule)."""
    package = [PACKAGE, *rel.split("/")[:-1]]  # the package a relative import starts from
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [node.module])])
            else:
                base = node.module or ""
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _is_within(module: str, top: str) -> bool:
    return module == top or module.startswith(top + ".")


def environment_reads(tree: ast.AST) -> Iterator[ast.Attribute | ast.ImportFrom]:
    """Every use of os.environ / os.environb / os.getenv / os.getenvb, and ``from os import``
    of them."""
    names = {"environ", "environb", "getenv", "getenvb"}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in names
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ) or (isinstance(node, ast.ImportFrom) and node.module == "os" and {a.name for a in node.names} & names):
            yield node


def _allowed_environment_uses(rel: str, tree: ast.AST) -> set[int]:
    """ids of the `os.environ` nodes this module may use: in cli.py, passed into
    `Settings.from_env(...)`; in a library-setup module, writing its one variable."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        passed_to_settings = (
            rel == CLI and func.attr == "from_env" and isinstance(func.value, ast.Name) and func.value.id == "Settings"
        )
        if passed_to_settings:
            args = [*node.args, *(k.value for k in node.keywords)]
            allowed |= {id(n) for a in args for n in ast.walk(a)}
        first = node.args[0] if node.args else None
        sets_library_variable = (
            func.attr == "setdefault"
            and isinstance(first, ast.Constant)
            and (rel, first.value) in ENV_WRITES_FOR_LIBRARIES
        )
        if sets_library_variable:
            allowed.add(id(func.value))
    return allowed


# ---------------------------------------------------------------------------- the rules
def test_write_shaped_sql_appears_only_in_storage_modules() -> None:
    offenders = [
        f"{rel}:{line}: {text}"
        for rel, tree in _modules()
        if not _matches(rel, STORAGE_MODULES)
        for line, text in write_sql_literals(tree)
    ]
    assert offenders == [], "move SQL that writes into a storage adapter (STORAGE_MODULES)"


def test_only_storage_adapters_import_a_database_driver() -> None:
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        if not _matches(rel, STORAGE_MODULES)
        for line, name in imported_modules(rel, tree)
        if any(_is_within(name, d) for d in DRIVERS)
    ]
    assert offenders == [], "only the storage adapters (STORAGE_MODULES) talk to a database driver"


def test_only_postgres_adapters_import_psycopg() -> None:
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        if not _matches(rel, PG_MODULES)
        for line, name in imported_modules(rel, tree)
        if any(_is_within(name, d) for d in PG_DRIVERS)
    ]
    assert offenders == [], "only a postgres/ adapter folder talks to psycopg"


def test_nothing_below_the_surfaces_imports_them() -> None:
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        if not rel.startswith(f"{SURFACES}/") and rel not in COMPOSITION_ROOTS
        for line, name in imported_modules(rel, tree)
        if _is_within(name, f"{PACKAGE}.{SURFACES}")
    ]
    assert offenders == [], "services, storage and search are imported by the surfaces, never the reverse"


def _adapter_importers() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for rel, tree in _modules():
        if _matches(rel, STORAGE_MODULES) or _matches(rel, WIRING):
            continue
        for line, name in imported_modules(rel, tree):
            parts = name.split(".")
            if parts[0] == PACKAGE and any(f in parts[1:] for f in ADAPTER_FOLDERS):
                found.setdefault(rel, []).append(f"{line}: {name}")
    return found


def test_services_depend_on_ports_not_on_storage_adapters() -> None:
    offenders = _adapter_importers()
    assert offenders == {}, "a service takes its repositories through its domain's ports.py (app.py wires them)"


def operations_offences(rel: str, tree: ast.AST) -> Iterator[str]:
    """What a module of operations/ imports that it must not: the composition roots (anywhere in
    operations/, its adapter included) and, outside its adapter folders, any storage adapter."""
    if not rel.startswith(f"{OPERATIONS}/"):
        return
    adapter = _matches(rel, STORAGE_MODULES)
    for line, name in imported_modules(rel, tree):
        parts = name.split(".")
        root = any(_is_within(name, r) for r in ROOTS)
        storage = parts[0] == PACKAGE and any(f in parts[1:] for f in ADAPTER_FOLDERS)
        if root or (storage and not adapter):
            yield f"{rel}:{line}: {name}"


def test_operations_import_neither_an_adapter_nor_the_composition_root() -> None:
    offenders = [offence for rel, tree in _modules() for offence in operations_offences(rel, tree)]
    assert offenders == [], (
        "operations/ takes an operations.ports.Installation (app.Memory is one) and reaches storage "
        "through its OperatorStore; the SQLite side lives in operations/sqlite/"
    )


def _backend_of(rel: str) -> str | None:
    """The backend whose adapter folder holds module `rel` (a path), or None."""
    return next((f for f in ADAPTER_FOLDERS if f in rel.split("/")[:-1]), None)


def cross_backend_imports(rel: str, tree: ast.AST) -> Iterator[str]:
    """``line: module`` for each import by the adapter module `rel` of another backend's adapter folder."""
    home = _backend_of(rel)
    if home is None:
        return
    for line, name in imported_modules(rel, tree):
        parts = name.split(".")
        if parts[0] == PACKAGE and any(f in parts[1:-1] for f in ADAPTER_FOLDERS if f != home):
            yield f"{line}: {name}"


#: Adapter modules every backend may use, with the reason. FTS5's tokenizer as a library (an
#: in-memory SQLite table, no database file): the PostgreSQL index must hold the very tokens FTS5
#: counts, or its bm25 would not be FTS5's.
SHARED_ADAPTER_MODULES: frozenset[str] = frozenset({f"{PACKAGE}.search.sqlite.tokens"})


def test_an_adapter_folder_never_imports_another_backends_adapter() -> None:
    offenders = {
        rel: found
        for rel, tree in _modules()
        if (
            found := [
                f
                for f in cross_backend_imports(rel, tree)
                if not any(_is_within(f.split(": ", 1)[1], m) for m in SHARED_ADAPTER_MODULES)
            ]
        )
    }
    assert offenders == {}, "what two backends share belongs outside both adapter folders (ports, rules, ranking)"


@pytest.mark.parametrize(
    ("rel", "source", "flagged"),
    [
        ("processes/postgres/store.py", "from robot_mcp_memory.processes.sqlite.store import BM25_WEIGHTS\n", True),
        ("processes/postgres/store.py", "from robot_mcp_memory.processes.sqlite import store\n", True),
        ("fleet/sqlite/store.py", "import robot_mcp_memory.storage.postgres.store\n", True),
        ("processes/postgres/store.py", "from ..sqlite.store import upsert\n", True),
        ("processes/postgres/store.py", "from robot_mcp_memory.storage.postgres import PostgresStore\n", False),
        ("processes/postgres/store.py", "from robot_mcp_memory.search.sqlite.tokens import Fts5Tokens\n", True),
        ("processes/ranking.py", "from robot_mcp_memory.processes.sqlite.store import Snapshot\n", False),
        ("processes/postgres/store.py", "from robot_mcp_memory.processes.ranking import BM25_WEIGHTS\n", False),
    ],
)
def test_the_cross_backend_detector(rel: str, source: str, flagged: bool) -> None:
    assert bool(list(cross_backend_imports(rel, ast.parse(source)))) is flagged


def test_storage_and_search_know_no_domain() -> None:
    domains = [f"{PACKAGE}.{d}" for d in (*DOMAINS, "operations", "tenancy")]
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        if _matches(rel, DOMAIN_FREE) and rel not in DOMAIN_FREE_EXCEPTIONS
        for line, name in imported_modules(rel, tree)
        if any(_is_within(name, d) for d in domains)
    ]
    assert offenders == []


def test_a_domain_reaches_another_domain_only_through_its_service_or_model() -> None:
    """processes/ may use fleet's service, never fleet's adapter (the wiring passes adapters)."""
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        for home in DOMAINS
        if rel.startswith(f"{home}/") and not _matches(rel, STORAGE_MODULES)
        for line, name in imported_modules(rel, tree)
        for other in DOMAINS
        if other != home and any(_is_within(name, f"{PACKAGE}.{other}.{f}") for f in ADAPTER_FOLDERS)
    ]
    assert offenders == []


def test_errors_imports_nothing_of_ours() -> None:
    tree = dict(_modules())["errors.py"]
    assert [n for _, n in imported_modules("errors.py", tree) if _is_within(n, PACKAGE)] == []


def test_only_the_mcp_adapter_imports_mcp() -> None:
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        if not _matches(rel, MCP_ADAPTER)
        for line, name in imported_modules(rel, tree)
        if _is_within(name, "mcp")
    ]
    assert offenders == [], "only surfaces/ and tenancy/middleware.py may import mcp"


@cache
def _sdk_private_names() -> frozenset[str]:
    """Underscore names the SDKs define (attributes set on `self`, functions, classes, module names)."""
    names: set[str] = set()
    for sdk in SDKS:
        spec = importlib.util.find_spec(sdk)
        assert spec is not None, sdk
        assert spec.submodule_search_locations, sdk
        for folder in spec.submodule_search_locations:
            for path in Path(folder).rglob("*.py"):
                names.update(p for p in path.with_suffix("").parts if p.startswith("_") and not p.startswith("__"))
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                        candidate = node.attr
                    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        candidate = node.name
                    else:
                        continue
                    if candidate.startswith("_") and not candidate.startswith("__"):
                        names.add(candidate)
    return frozenset(names)


@cache
def _our_private_names() -> frozenset[str]:
    names: set[str] = set()
    for _rel, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return frozenset(names)


def sdk_private_uses(rel: str, tree: ast.AST, sdk_private: frozenset[str], ours: frozenset[str]) -> Iterator[str]:
    """Imports of an SDK's underscore names or internal modules, and attribute reads of a private
    name an SDK defines and we do not."""
    for line, name in imported_modules(rel, tree):
        if any(_is_within(name, sdk) for sdk in SDKS) and (
            any(part.startswith("_") and not part.startswith("__") for part in name.split("."))
            or any(_is_within(name, internal) for internal in SDK_INTERNAL_MODULES)
        ):
            yield f"{line}: {name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in sdk_private and node.attr not in ours:
            yield f"{node.lineno}: .{node.attr}"


def _private_users() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for rel, tree in _modules():
        uses = list(sdk_private_uses(rel, tree, _sdk_private_names(), _our_private_names()))
        if uses:
            found[rel] = uses
    return found


def test_no_module_uses_a_private_name_of_mcp_starlette_or_uvicorn() -> None:
    offenders = {rel: uses for rel, uses in _private_users().items() if rel not in PRIVATE_DEBT}
    assert offenders == {}, "use the SDKs through their public interfaces"


def test_the_private_debt_list_only_shrinks() -> None:
    assert sorted(PRIVATE_DEBT - set(_private_users())) == [], "remove these from PRIVATE_DEBT: they are clean"


#: A virtual table's declaration as FTS5 (`kinds.fts5_table` and hand-written DDL alike).
FTS5_DDL = re.compile(r"CREATE\s+VIRTUAL\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:\w+\.)?(\w+)\s+USING\s+fts5\s*\(", re.I)
FTS5_SHADOWS = ("data", "docsize", "idx", "content")


def _literal_texts(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal but docstrings; an f-string's fields read ``{}``."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                skip.add(id(part))
            yield node.lineno, "".join(str(p.value) if isinstance(p, ast.Constant) else "{}" for p in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def fts5_tables(trees: list[ast.AST]) -> set[str]:
    """The FTS5 tables these modules declare: by DDL, or by `fts5_table("name", ...)`."""
    names: set[str] = set()
    for tree in trees:
        for _, text in _literal_texts(tree):
            names.update(m.group(1) for m in FTS5_DDL.finditer(text))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "fts5_table"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names.add(node.args[0].value)
    return names


def fts5_shadow_reads(tree: ast.AST, tables: set[str]) -> Iterator[tuple[int, str]]:
    """(line, name) of every shadow table of an FTS5 table named in a literal: ``memories_fts_docsize``,
    or an f-string's ``{table}_data``."""
    prefix = "|".join([r"\{\}", *sorted(re.escape(t) for t in tables)])
    shadow = re.compile(rf"(?<!\w)(?:{prefix})_(?:{'|'.join(FTS5_SHADOWS)})(?!\w)")
    for line, text in _literal_texts(tree):
        for m in shadow.finditer(text):
            yield line, m.group(0)


def test_no_module_reads_an_fts5_tables_private_shadow_tables() -> None:
    modules = _modules()
    tables = fts5_tables([tree for _, tree in modules])
    assert {"memories_fts", "processes_fts"} <= tables
    offenders = [f"{rel}:{line}: {name}" for rel, tree in modules for line, name in fts5_shadow_reads(tree, tables)]
    assert offenders == [], "read an FTS5 index through SQL on the table or fts5vocab, or keep a table of our own"


@pytest.mark.parametrize(
    "source",
    [
        'conn.execute("SELECT id, sz FROM memories_fts_docsize")',
        'conn.execute(f"SELECT block FROM {table}_data WHERE id = 1")',
        'TRIGGER = "WHEN EXISTS (SELECT 1 FROM memories_fts_docsize WHERE id = NEW.id)"',
        'c.execute("CREATE VIRTUAL TABLE probe USING fts5(a, b)")\nc.execute("SELECT id, sz FROM probe_docsize")',
        'T = fts5_table("notes_fts", source="notes", columns="body")\nQ = "SELECT * FROM notes_fts_idx"',
    ],
)
def test_the_shadow_detector_flags_reads_of_fts5_internals(source: str) -> None:
    tree = ast.parse(source)
    assert list(fts5_shadow_reads(tree, fts5_tables([tree]) | {"memories_fts"}))


@pytest.mark.parametrize(
    "source",
    [
        'q = "SELECT rowid, content, context FROM memories_fts WHERE rowid = ?"',
        'q = "SELECT doc, col FROM temp.memories_fts_instances"',
        'q = f"UPDATE t SET new_content = ? WHERE {col}_id = ?"',
        'def f():\n    """FTS5 keeps its lengths in memories_fts_docsize, which we never read."""',
    ],
)
def test_the_shadow_detector_ignores_public_reads_and_prose(source: str) -> None:
    assert list(fts5_shadow_reads(ast.parse(source), {"memories_fts"})) == []


def test_only_config_reads_the_environment() -> None:
    offenders = [
        f"{rel}:{node.lineno}: {ast.unparse(node)}"
        for rel, tree in _modules()
        if rel != ENV_READER
        for node in environment_reads(tree)
        if id(node) not in _allowed_environment_uses(rel, tree)
    ]
    assert offenders == [], "read settings through config.Settings.from_env (surfaces/cli.py passes os.environ in)"


# ---------------------------------------------------------------------------- the detectors can fail
@pytest.mark.parametrize(
    "source",
    [
        'sql = "INSERT INTO processes(id) VALUES (?)"',
        'sql = "insert or replace into t values (1)"',
        'sql = "  UPDATE processes SET title = ?"',
        'sql = f"UPDATE {table} SET n = n + 1"',
        'sql = f"DELETE FROM {table} WHERE id = ?"',
        'sql = "REPLACE INTO t VALUES (1)"',
        'sql = "CREATE VIRTUAL TABLE x USING fts5(a)"',
        'sql = "CREATE UNIQUE INDEX i ON t(a)"',
        'sql = "DROP TABLE t"',
        'sql = "ALTER TABLE t ADD COLUMN c"',
    ],
)
def test_the_sql_detector_flags_write_shaped_literals(source: str) -> None:
    assert list(write_sql_literals(ast.parse(source)))


@pytest.mark.parametrize(
    "source",
    [
        'msg = "Update the robot, then retry"',
        'msg = "delete the process with delete_process"',
        'sql = "SELECT id FROM processes"',
        'def f():\n    """DELETE FROM t is how this would be done."""',
    ],
)
def test_the_sql_detector_ignores_prose_reads_and_docstrings(source: str) -> None:
    assert list(write_sql_literals(ast.parse(source))) == []


def test_the_import_detector_resolves_relative_and_from_imports() -> None:
    tree = ast.parse("from . import store\nfrom ..server import build\nimport sqlite3\nfrom mcp.types import X\n")
    names = {name for _, name in imported_modules("search/fts.py", tree)}
    assert {f"{PACKAGE}.search.store", f"{PACKAGE}.server", f"{PACKAGE}.server.build", "sqlite3", "mcp.types"} <= names


def test_the_environment_detector_allows_exactly_passing_os_environ_into_settings() -> None:
    def offending(rel: str, source: str) -> list[int]:
        tree = ast.parse(source)
        ok = _allowed_environment_uses(rel, tree)
        return [n.lineno for n in environment_reads(tree) if id(n) not in ok]

    passed = "s = Settings.from_env({**os.environ, **overrides})\n"
    assert offending(CLI, passed) == []
    assert offending(CLI, "env = dict(os.environ)\ns = Settings.from_env(env)\n") == [1]
    assert offending("app.py", passed) == [1]
    assert offending("app.py", "from os import getenv\n") == [1]
    assert offending("search/embedders.py", 'os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")\n') == []
    assert offending("search/embedders.py", 'os.environ.setdefault("HOME", "/")\n') == [1]


def test_the_private_name_detector_flags_sdk_internals() -> None:
    tree = ast.parse(
        "from mcp.server.fastmcp.utilities.func_metadata import FuncMetadata\n"
        "from uvicorn._types import ASGIApp\n"
        "x = server._tool_manager\n"
        "y = self._ours\n"
    )
    uses = list(sdk_private_uses("surfaces/x.py", tree, frozenset({"_tool_manager", "_ours"}), frozenset({"_ours"})))
    assert [u.split(": ")[1] for u in uses] == [
        "mcp.server.fastmcp.utilities.func_metadata",
        "mcp.server.fastmcp.utilities.func_metadata.FuncMetadata",
        "uvicorn._types",
        "uvicorn._types.ASGIApp",
        ".\x5ftool_manager",
    ]


def test_the_sdk_private_names_are_found() -> None:
    assert {"_tool_manager", "_mcp_server"} <= _sdk_private_names()


@pytest.mark.parametrize("folder", ADAPTER_FOLDERS)
def test_the_adapter_detector_sees_an_adapter_import(folder: str) -> None:
    tree = ast.parse(f"from robot_mcp_memory.processes.{folder}.store import ProcessStore\n")
    names = [n for _, n in imported_modules("processes/service.py", tree)]
    assert any(any(f in n.split(".") for f in ADAPTER_FOLDERS) for n in names)


@pytest.mark.parametrize(
    ("rel", "source"),
    [
        ("operations/service.py", "from robot_mcp_memory.app import Memory\n"),
        ("operations/handover.py", "from ..app import Memory\n"),
        ("operations/sqlite/store.py", "import robot_mcp_memory.api\n"),
        ("operations/service.py", "from robot_mcp_memory.storage.sqlite import maintenance\n"),
        ("operations/readiness.py", "from robot_mcp_memory.fleet.sqlite.store import check_robot_id\n"),
        ("operations/service.py", "from .sqlite.store import SqliteOperations\n"),
    ],
)
def test_the_operations_detector_flags_the_root_and_adapters(rel: str, source: str) -> None:
    assert list(operations_offences(rel, ast.parse(source)))


@pytest.mark.parametrize(
    ("rel", "source"),
    [
        ("operations/sqlite/store.py", "from robot_mcp_memory.storage.sqlite import maintenance\n"),
        ("operations/service.py", "from robot_mcp_memory.operations.ports import Installation\n"),
        ("operations/handover.py", "from robot_mcp_memory.fleet.model import check_robot_id\n"),
        ("processes/service.py", "from robot_mcp_memory.app import Memory\n"),  # another rule's business
    ],
)
def test_the_operations_detector_lets_ports_models_and_the_adapter_be(rel: str, source: str) -> None:
    assert list(operations_offences(rel, ast.parse(source))) == []


@pytest.mark.parametrize(
    "source",
    [
        "server = mcp._mcp_server\n",
        "live = session_id in manager._server_instances\n",
        "tool = mcp._tool_manager.get_tool(name)\n",
        "from uvicorn.protocols.http.h11_impl import H11Protocol\n",
        "from mcp.server.fastmcp.utilities.func_metadata import FuncMetadata\n",
    ],
)
def test_each_private_name_the_surfaces_once_used_is_flagged_again(source: str) -> None:
    """What `surfaces/mcp/server.py` and `surfaces/serve.py` reached into before they used the
    SDKs' public interfaces: each, put back into a module of ours, is found with the real name lists."""
    tree = ast.parse(source)
    assert list(sdk_private_uses("surfaces/mcp/server.py", tree, _sdk_private_names(), _our_private_names()))
