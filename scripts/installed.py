#!/usr/bin/env python3
"""minikafka as users get it: an sdist, a wheel built from that sdist, installed into a fresh virtualenv.

These are the install steps of docker/Dockerfile and of `make test`, which runs every broker process of its
minikafka passes from this install (MINIKAFKA_EXECUTABLE=<venv>/bin/minikafka) instead of the editable
checkout, so a module, data file or entry point the package lacks fails the suite.

    python scripts/installed.py [--venv .venv-installed] [--dist dist] [--force]

Prints the installed `minikafka` executable. Building from the sdist (`python -m build`, no in-tree
build/ dir) means the wheel holds only what the sdist carries and nothing stale. The venv is reused while
the sources hash the same (a stamp in the venv); --force rebuilds. Needs the `build` package in the
interpreter running this script (the `test` extra pins it).
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_PACKAGING_FILES = ("pyproject.toml", "setup.py", "README.md")


def source_folders() -> list[Path]:
    """The folders mapped into the package (pyproject.toml `[tool.setuptools.package-dir]`)."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return [ROOT / folder for folder in mapping.values()]


def source_digest() -> str:
    """A digest of everything the build reads: the packaging files and every source file in a mapped folder."""
    h = hashlib.sha256()
    files = [ROOT / name for name in _PACKAGING_FILES]
    for folder in source_folders():
        files += sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                        and p.suffix not in (".so", ".pyc"))
    for path in files:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build(dist: Path) -> Path:
    """sdist, then the wheel from it; returns the wheel."""
    shutil.rmtree(dist, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], check=True,
                   stdout=subprocess.DEVNULL)
    (wheel,) = dist.glob("minikafka-*.whl")
    return wheel


WHEEL_RECORD = ".minikafka-wheel"  # in the venv: the path of the wheel installed there


def install(wheel: Path, venv: Path) -> Path:
    """A fresh virtualenv at `venv` with the wheel and its pinned dependencies; returns its `minikafka`."""
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(wheel)], check=True)
    exe = venv / "bin" / "minikafka"
    if not exe.exists():
        raise SystemExit(f"installed.py: {exe} missing: the wheel has no `minikafka` entry point")
    (venv / WHEEL_RECORD).write_text(str(wheel))
    return exe


def installed_wheel(exe: Path) -> Path | None:
    """The wheel that the venv of `exe` (a `minikafka` executable installed here) was installed from."""
    record = exe.parent.parent / WHEEL_RECORD
    if not record.exists():
        return None
    wheel = Path(record.read_text().strip())
    return wheel if wheel.exists() else None


def ensure(venv: Path, dist: Path, force: bool = False) -> Path:
    """The installed executable, rebuilt when the sources changed since the last install into `venv`."""
    stamp = venv / f".minikafka-sources-{source_digest()}"
    exe = venv / "bin" / "minikafka"
    if force or not stamp.exists() or not exe.exists():
        exe = install(build(dist), venv)
        stamp.touch()
    return exe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venv", default=str(ROOT / ".venv-installed"))
    ap.add_argument("--dist", default=str(ROOT / "dist"))
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    print(ensure(Path(args.venv).absolute(), Path(args.dist).absolute(), args.force))


if __name__ == "__main__":
    main()
