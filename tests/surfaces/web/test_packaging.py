"""The dashboard ships in the wheel: every file under web/static/ matches the package-data globs."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STATIC = ROOT / "src" / "robot_mcp_memory" / "surfaces" / "web" / "static"
BASELINE = ROOT / "src" / "robot_mcp_memory" / "storage" / "sqlite" / "index_baseline.sql"


def test_every_dashboard_asset_is_declared_as_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["robot_mcp_memory.surfaces.web"]
    files = [p.relative_to(STATIC.parent).as_posix() for p in STATIC.rglob("*") if p.is_file()]
    assert files
    missing = [
        f for f in files if not any(fnmatch.fnmatchcase(f, pat) and f.count("/") == pat.count("/") for pat in patterns)
    ]
    assert not missing, f"add these to [tool.setuptools.package-data] in pyproject.toml: {missing}"


def test_the_dashboard_loads_nothing_from_outside() -> None:
    for path in STATIC.rglob("*"):
        if path.suffix in (".html", ".js", ".css"):
            text = path.read_text(encoding="utf-8")
            for marker in ("http://", "https://", "//cdn", "innerHTML"):
                if marker == "innerHTML" and path.name == "dom.js":
                    continue  # trustedHtml: server-rendered, escaped markdown only
                if marker.startswith("http") and path.name in ("dom.js", "charts.js"):
                    text = text.replace("http://www.w3.org/2000/svg", "").replace("/^https?:\\/\\//", "")
                assert marker not in text, f"{path.name} contains {marker}"


def test_the_baseline_schema_is_declared_as_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["robot_mcp_memory.storage.sqlite"]
    assert BASELINE.is_file()
    assert any(fnmatch.fnmatchcase(BASELINE.name, pat) for pat in patterns)
