"""A start-up that cannot half-fail: minikafka installed from its wheel, then damaged (a module removed, or
one that fails to import), exits non-zero with one clear line; it never logs "ready" and its
/health/ready never answers 200."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.minikafka_only


@pytest.fixture
def damaged(tmp_path: Path, built_wheel: Path) -> Path:
    """The wheel installed into a private dir (dependencies: this venv's), to be damaged by the test."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(built_wheel)], check=True, timeout=300)
    return target


def serve(site: Path, tmp_path: Path, *overrides: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_")}
    # -S: no site, so neither this checkout's editable install nor anything but `site` provides minikafka
    env["PYTHONPATH"] = f"{site}{os.pathsep}{sysconfig.get_paths()['purelib']}"
    args = [sys.executable, "-S", "-m", "minikafka.broker.cli.main", "serve", "--override", f"log.dirs={tmp_path / 'data'}"]
    for o in overrides:
        args += ["--override", o]
    return subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def finish(proc: subprocess.Popen, timeout: float = 30) -> str:
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the damaged broker did not exit: " + proc.communicate()[0][-3000:])


def one_clear_line(out: str, *needles: str) -> None:
    lines = [line for line in out.splitlines() if line.startswith("minikafka: ")]
    assert len(lines) == 1, out
    assert "this installation of minikafka is incomplete" in lines[0], out
    for needle in needles:
        assert needle in lines[0], out
    assert "Traceback" not in out and "ready: " not in out and " ready in " not in out, out
    assert "shut down cleanly" not in out, out


def test_a_missing_handler_module_stops_a_single_node_before_it_listens(damaged, tmp_path):
    (damaged / "minikafka" / "broker" / "handlers" / "describe_producers.py").unlink()
    port = free_port()
    proc = serve(damaged, tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{port}")
    out = finish(proc)
    assert proc.returncode == 2, out
    one_clear_line(out, "minikafka.broker.handlers.describe_producers")
    assert "listening on" not in out, out


def test_a_missing_cluster_package_stops_a_quorum_node(damaged, tmp_path):
    """The case of the broken wheel: `minikafka.metadata` absent, a single-voter KRaft node."""
    shutil.rmtree(damaged / "minikafka" / "metadata")
    port, controller = free_port(), free_port()
    proc = serve(damaged, tmp_path, "node.id=1", "process.roles=broker,controller",
                 f"controller.quorum.voters=1@127.0.0.1:{controller}", "controller.listener.names=CONTROLLER",
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                 f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}")
    out = finish(proc)
    assert proc.returncode == 2, out
    one_clear_line(out, "(minikafka.metadata)")
    assert "listening on" not in out, out


def test_a_module_that_fails_in_the_warm_up_ends_the_process_never_ready(damaged, tmp_path):
    """Present but broken (a dependency it imports is not installed): found at start, failing in the warm-up
    after the port opened. The process exits 2; /health/ready, polled all along, never says 200."""
    module = damaged / "minikafka" / "broker" / "handlers" / "describe_producers.py"
    module.write_text(module.read_text() + "\nimport minikafka_dependency_that_is_not_installed  # noqa\n")
    port, admin = free_port(), free_port()
    proc = serve(damaged, tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{port}",
                 f"minikafka.metrics.listener=http://127.0.0.1:{admin}")
    statuses: list[int] = []
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}/health/ready", timeout=2) as resp:
                statuses.append(resp.status)
        except urllib.error.HTTPError as exc:
            statuses.append(exc.code)
        except OSError:
            pass
        time.sleep(0.005)
    out = finish(proc)
    assert proc.returncode == 2, out
    assert 200 not in statuses and 503 in statuses, (statuses, out)
    one_clear_line(out, "minikafka_dependency_that_is_not_installed")
    assert "listening on" in out  # it did get that far: the failure came after the port opened
