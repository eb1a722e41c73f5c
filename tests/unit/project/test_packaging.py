"""The wheel holds the source tree, all of it and nothing else: every module and data file under a folder
that pyproject.toml maps into `minikafka` ships at its package path, so a new sub-package can never be left
out (or a deleted module linger from a stale build dir)."""
from __future__ import annotations

import tomllib
import zipfile
from pathlib import Path

from tests.conftest import ROOT

_SHIPPED_SUFFIXES = {".py", ".json"}  # code and the protocol schemas; the C source goes to the sdist only


def source_files() -> dict[str, Path]:
    """wheel path -> source file, for every shipped file under the mapped folders."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out: dict[str, Path] = {}
    for package, folder in mapping.items():
        base = ROOT / folder
        for path in base.rglob("*"):
            if path.is_file() and path.suffix in _SHIPPED_SUFFIXES and "__pycache__" not in path.parts:
                out["/".join([*package.split("."), *path.relative_to(base).parts])] = path
    return out


def test_every_source_folder_is_mapped():
    """A top-level folder holding a package is either mapped into `minikafka` or is not shipped on purpose."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    not_shipped = {"tests", "bench", "scripts", "examples", "docs", "build", "dist"}
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - not_shipped
    assert packages == set(mapping.values())


def test_the_wheel_matches_the_source_tree(built_wheel: Path):
    with zipfile.ZipFile(built_wheel) as wheel:
        names = set(wheel.namelist())
        entry_points = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    shipped = {n for n in names if Path(n).suffix in _SHIPPED_SUFFIXES}
    expected = source_files()
    assert sorted(set(expected) - shipped) == [], "in the source tree but not in the wheel"
    assert sorted(shipped - set(expected)) == [], "in the wheel but not in the source tree"
    # every package directory is a regular package (a folder without __init__.py would be left out)
    package_dirs = {str(Path(n).parent) for n in expected}
    assert sorted(d for d in package_dirs if f"{d}/__init__.py" not in shipped) == []
    assert "minikafka = minikafka.broker.cli.main:main" in entry_points
    assert "minikafka.pytest_plugin = minikafka.pytest_plugin" in entry_points
    assert any(n.startswith("minikafka/protocol/_recordscan") and n.endswith(".so") for n in names)
