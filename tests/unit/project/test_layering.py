"""The layering contracts of pyproject.toml ([tool.importlinter]) hold for the package as installed: import-linter
reads the wheel's files (the source folders are only assembled into `minikafka` by the install), with every
import counted, those inside functions and under TYPE_CHECKING included."""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.conftest import ROOT


def test_the_import_contracts_are_kept(built_wheel: Path, tmp_path: Path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(built_wheel)],
                   check=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(site)}
    lint = Path(sysconfig.get_paths()["scripts"]) / "lint-imports"
    # run outside the checkout: import-linter puts its working directory first on sys.path, where the source
    # folder `minikafka/` (without the mapped sub-packages) would shadow the installed package
    proc = subprocess.run([str(lint), str(ROOT / "pyproject.toml")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


MAX_MODULE_LINES = 800


def test_every_module_stays_small():
    """A module past ~800 lines is doing several jobs: split it by job (as storage/partition_log.py was into
    log_loader, append_preparation, pending_writes, log_reads and retention) rather than raise this."""
    import tomllib
    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    big = {str(path.relative_to(ROOT)): n for folder in folders for path in (ROOT / folder).rglob("*.py")
           if "__pycache__" not in path.parts and (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"
