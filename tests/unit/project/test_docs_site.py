"""The docs site builds with `mkdocs build --strict`: a broken link, a missing anchor or a page left out of
the nav fails it. README's links into the site must point at pages that exist."""
from __future__ import annotations

import os
import re
import subprocess
import sysconfig
from pathlib import Path

from tests.conftest import ROOT


def test_the_site_builds_strictly(tmp_path: Path):
    mkdocs = Path(sysconfig.get_paths()["scripts"]) / "mkdocs"
    proc = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert (tmp_path / "site" / "reference" / "broker-configs" / "index.html").exists()


def test_readme_links_point_at_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)]+)\)", readme) if "://" not in t]
    assert targets, "README links into docs/"
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 120, "the long sections live in docs/"
