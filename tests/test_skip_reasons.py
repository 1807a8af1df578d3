"""Every skip says how to enable the test: what to install, set or run it as. A skipped test
whose reason only says what is missing leaves the reader to find out how to get it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: A reason enables its test when it says what to install, which variable to set, or how to run.
HOW = re.compile(r"\binstall\b|\bset [A-Z][A-Z_]+\b|\brun the tests (?:as|on|with)\b")


def _text(node: ast.expr) -> str | None:
    """A string literal's text (an f-string's literal parts), or None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def _reasons(tree: ast.Module) -> list[tuple[int, ast.expr]]:
    found: list[tuple[int, ast.expr]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "skip" and node.args:
            found.append((node.lineno, node.args[0]))
        found += [(node.lineno, k.value) for k in node.keywords if k.arg == "reason" and node.func.attr == "skipif"]
    return found


def test_every_skip_reason_says_how_to_enable_the_test() -> None:
    constants: dict[str, str] = {}
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(TESTS.rglob("*.py"))}
    for tree in trees.values():  # module-level string constants a reason may name
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                text = _text(node.value)
                if text is not None:
                    constants[node.targets[0].id] = text
    vague: list[str] = []
    seen = 0
    for path, tree in trees.items():
        for line, reason in _reasons(tree):
            text = constants.get(reason.id) if isinstance(reason, ast.Name) else _text(reason)
            seen += 1
            if text is None or not HOW.search(text):
                vague.append(f"{path.relative_to(TESTS)}:{line}: {text!r}")
    assert seen >= 5  # the scan finds the skips there are
    assert vague == []
