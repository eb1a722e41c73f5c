"""Package discovery for the source-folder mapping of pyproject.toml (everything else lives there).

`[tool.setuptools.package-dir]` maps each top-level source folder (broker/, protocol/, ...) to a
`minikafka.*` package. setuptools' own `find` cannot add that prefix, so this walks each mapped folder with
`find_packages` and prefixes what it finds: every sub-package under a mapped folder ships, by construction,
and tests/unit/project/test_packaging.py checks the built wheel against the source tree.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent


def mapped_packages() -> list[str]:
    package_dir: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    packages: list[str] = []
    for package, folder in package_dir.items():
        packages.append(package)
        packages += [f"{package}.{sub}" for sub in find_packages(str(ROOT / folder))]
    return sorted(set(packages))


setup(packages=mapped_packages())
