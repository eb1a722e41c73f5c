"""The pytest plugin as users get it: examples/pytest-project runs in a separate pytest process against
minikafka installed from a wheel (not this source tree), once plainly and once under pytest-xdist -n 2.

Also the fixtures in this suite's own process (the plugin is loaded by tests/conftest.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.minikafka_only


def test_fixtures_in_this_suite(minikafka, minikafka_factory):
    other = minikafka_factory(config={"num.partitions": "4"})
    assert minikafka.alive() and other.alive()
    assert other.bootstrap_servers != minikafka.bootstrap_servers
    other.create_topic("t", partitions=2)
    with pytest.raises(RuntimeError, match="TopicAlreadyExists"):
        other.create_topic("t")


@pytest.fixture(scope="module")
def installed(tmp_path_factory, built_wheel: Path) -> Path:
    """minikafka's wheel (the one `make test` installs) installed with pip into a private dir (no deps: the
    venv's)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(built_wheel)], check=True, timeout=300)
    entry_points = next(target.glob("minikafka-*.dist-info")) / "entry_points.txt"
    assert "minikafka.pytest_plugin = minikafka.pytest_plugin" in entry_points.read_text()
    return target


def _run_example(installed: Path, tmp_path: Path, *args: str) -> list[dict]:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "pytest-project", project)
    report = tmp_path / "report"
    report.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MINIKAFKA_"))}
    # -S: no site, so the venv's editable install of this tree is invisible; dependencies (pytest,
    # pytest-xdist, confluent-kafka, kafka-python ...) come from the venv's site-packages, after the wheel
    env["PYTHONPATH"] = f"{installed}{os.pathsep}{sysconfig.get_paths()['purelib']}"
    env["EXAMPLE_REPORT_DIR"] = str(report)
    proc = subprocess.run([sys.executable, "-S", "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "6 passed" in proc.stdout, proc.stdout[-2000:]
    rows = [json.loads(line) for f in report.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(rows) == 6
    for row in rows:  # the plugin and the broker package came from the wheel, not from this tree
        assert Path(row["package"]).resolve().is_relative_to(installed.resolve()), row
    return rows


def test_example_project_from_the_wheel(installed, tmp_path):
    rows = _run_example(installed, tmp_path, "--minikafka-config", "num.partitions=3")
    assert {r["worker"] for r in rows} == {"main"}
    assert len({(r["bootstrap"], r["pid"]) for r in rows}) == 1  # one session broker for every test


def test_example_project_under_xdist_has_a_broker_per_worker(installed, tmp_path):
    rows = _run_example(installed, tmp_path, "-n", "2")
    by_worker = {}
    for r in rows:
        by_worker.setdefault(r["worker"], set()).add((r["bootstrap"], r["pid"]))
    assert set(by_worker) == {"gw0", "gw1"}, by_worker
    assert all(len(brokers) == 1 for brokers in by_worker.values()), by_worker
    assert by_worker["gw0"] != by_worker["gw1"]  # two brokers, on two ports
