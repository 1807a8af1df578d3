"""The architecture, enforced: these tests walk ``src/`` with `ast` (nothing is imported).

- SQL that writes lives only in the storage modules, and only they import ``sqlite3``.
- Layers point one way: the kit, search, errors, config and the document model never import the
  surfaces (server, tools, web, cli, serve); only the MCP adapter imports ``mcp``.
- Only ``config.py`` reads the environment.

Each detector is also run on a few hand-written samples, so a guard that can no longer fail
does not pass silently.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE = "robot_mcp_memory"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE

#: The storage modules (paths relative to the package, fnmatch patterns where `*` spans folders):
#: the only places allowed to hold write-shaped SQL or import sqlite3.
STORAGE_MODULES: tuple[str, ...] = (
    "kit/*",
    "db.py",
    "store.py",
    "fleet.py",
    "params.py",
    "vectorstore.py",  # the `vectors` table of index.db (embedding BLOBs): storage by any other name
    "experiences/*repo.py",
    "experiences/storage.py",
    "experiences/robotmem_import.py",  # reads a robotmem memory.db (read-only) and writes what it brings across
    "experiences/*/storage.py",
)

#: Lower layers and the surfaces they must never reach.
LOWER_LAYERS: tuple[str, ...] = ("kit/*", "search/*", "errors.py", "config.py", "docmodel.py")
SURFACES: tuple[str, ...] = ("server", "tools", "web", "cli", "serve")

#: The MCP adapter: the only modules that may import the `mcp` SDK.
MCP_ADAPTER: tuple[str, ...] = ("tools/*", "web/*", "server.py", "serve.py", "stdio.py", "tenancy.py")

#: The kit knows nothing of our domains: what it may import from this package.
KIT_MAY_IMPORT: tuple[str, ...] = ("kit", "errors", "logs")

#: The only reader of the environment.
ENV_READER = "config.py"
#: Environment *writes* a third-party library needs before it is imported: (module, variable).
ENV_WRITES_FOR_LIBRARIES: frozenset[tuple[str, str]] = frozenset(
    {("search/embedders.py", "ORT_DISABLE_TELEMETRY")}  # onnxruntime >= 1.31 telemetry file (house style)
)

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
            rel == "cli.py"
            and func.attr == "from_env"
            and isinstance(func.value, ast.Name)
            and func.value.id == "Settings"
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
    assert offenders == [], "move SQL that writes into a storage module (STORAGE_MODULES)"


def test_only_storage_modules_import_sqlite3() -> None:
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        if not _matches(rel, STORAGE_MODULES)
        for line, name in imported_modules(rel, tree)
        if _is_within(name, "sqlite3")
    ]
    assert offenders == [], "only the storage modules (STORAGE_MODULES) talk to sqlite3"


def test_lower_layers_never_import_a_surface() -> None:
    surfaces = [f"{PACKAGE}.{s}" for s in SURFACES]
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        if _matches(rel, LOWER_LAYERS)
        for line, name in imported_modules(rel, tree)
        if any(_is_within(name, s) for s in surfaces)
    ]
    assert offenders == [], "the kit, search, errors, config and docmodel are imported by surfaces, never the reverse"


def test_the_kit_knows_nothing_of_our_domains() -> None:
    allowed = [f"{PACKAGE}.{m}" for m in KIT_MAY_IMPORT]
    offenders = [
        f"{rel}:{line}: {name}"
        for rel, tree in _modules()
        if _matches(rel, ("kit/*",))
        for line, name in imported_modules(rel, tree)
        if _is_within(name, PACKAGE) and name != PACKAGE and not any(_is_within(name, a) for a in allowed)
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
    assert offenders == [], "only tools/, web/, server.py, serve.py, stdio.py and tenancy.py may import mcp"


def test_only_config_reads_the_environment() -> None:
    offenders = [
        f"{rel}:{node.lineno}: {ast.unparse(node)}"
        for rel, tree in _modules()
        if rel != ENV_READER
        for node in environment_reads(tree)
        if id(node) not in _allowed_environment_uses(rel, tree)
    ]
    assert offenders == [], "read settings through config.Settings.from_env (cli.py passes os.environ into it)"


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
    assert offending("cli.py", passed) == []
    assert offending("cli.py", "env = dict(os.environ)\ns = Settings.from_env(env)\n") == [1]
    assert offending("app.py", passed) == [1]
    assert offending("app.py", "from os import getenv\n") == [1]
    assert offending("search/embedders.py", 'os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")\n') == []
    assert offending("search/embedders.py", 'os.environ.setdefault("HOME", "/")\n') == [1]
