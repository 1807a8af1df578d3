"""The user docs speak of this repository alone: no link or path into the workspace around it
(the README linked ``../shared/DESIGN.md``, which a clone does not have)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE_PATH = re.compile(r"(?<![\w.])(?:\.\./\S*|/work/\S*)")


def test_every_relative_link_in_the_docs_stays_inside_the_repository() -> None:
    outside: list[str] = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:|#", target):  # a URL or an anchor
                continue
            path = (doc.parent / target.split("#", 1)[0]).resolve()
            if not path.is_relative_to(ROOT):
                outside.append(f"{doc.relative_to(ROOT)}: {target}")
    assert outside == []


def test_no_doc_names_a_path_outside_the_repository() -> None:
    named = [
        f"{doc.relative_to(ROOT)}: {m.group(0)}"
        for doc in DOCS
        for m in OUTSIDE_PATH.finditer(doc.read_text(encoding="utf-8"))
    ]
    assert named == []
