"""The Dockerfile's steps without a Docker engine: a non-editable `pip install .` of the project, then
docker/entrypoint.sh with the image's environment; the broker must serve and stop cleanly on SIGTERM."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import ROOT, free_port

pytestmark = pytest.mark.minikafka_only


def test_dockerfile_mentions_the_steps_tested_here():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert re.search(r"&& pip install --no-cache-dir \. ", dockerfile)
    assert re.search(r"apt-get install -y --no-install-recommends gcc libc6-dev", dockerfile)  # the C scanner
    assert "ENTRYPOINT [\"minikafka-entrypoint\"]" in dockerfile
    assert "docker/entrypoint.sh /usr/local/bin/minikafka-entrypoint" in dockerfile
    assert "USER minikafka" in dockerfile and "EXPOSE 9092 9644" in dockerfile
    assert re.search(r"^RUN useradd --system --uid \d+ .* minikafka$", dockerfile, re.M)  # non-root
    # the health check runs the script the entrypoint test below runs, on the ready endpoint
    assert "COPY docker/healthcheck.py /usr/local/bin/minikafka-healthcheck" in dockerfile
    assert re.search(r'^HEALTHCHECK .*\\\n\s+CMD \["python", "/usr/local/bin/minikafka-healthcheck"\]$', dockerfile, re.M)
    assert "MINIKAFKA_MINIKAFKA_METRICS_LISTENER=http://0.0.0.0:9644" in dockerfile
    assert dockerfile.index("USER minikafka") < dockerfile.index("ENTRYPOINT")
    # every source folder pyproject.toml maps into the package is copied into the image
    import tomllib
    package_dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for folder in {d.split("/")[0] for d in package_dirs.values()}:
        assert re.search(rf"^COPY {re.escape(folder)} \./{re.escape(folder)}$", dockerfile, re.M), folder


def test_installed_package_runs_through_entrypoint(tmp_path: Path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(target), str(ROOT)], check=True, timeout=300)
    # The installed tree must hold the four code folders under the one `minikafka` package.
    for sub in ("broker", "protocol", "storage", "coordinator"):
        assert (target / "minikafka" / sub / "__init__.py").exists()
    assert not (target / "broker").exists() and not (target / "storage").exists()
    # with a compiler (as the Dockerfile installs one) the native record scanner is built
    assert list((target / "minikafka" / "protocol").glob("_recordscan*.so")), "record scanner not built"

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "minikafka").write_text(f"#!/bin/sh\nexec {sys.executable} -S -m minikafka.broker.cli \"$@\"\n")
    (bindir / "minikafka").chmod(0o755)
    port = free_port()
    metrics_port = free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_")}
    env.update({
        "PATH": f"{bindir}:{env['PATH']}",
        # -S skips site (and so the editable install's finder); dependencies come from this venv's site-packages
        "PYTHONPATH": f"{target}:{sysconfig.get_paths()['purelib']}",
        "MINIKAFKA_LOG_DIRS": str(data),
        "MINIKAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "MINIKAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "MINIKAFKA_MINIKAFKA_METRICS_LISTENER": f"http://0.0.0.0:{metrics_port}",
    })

    def healthy() -> int:
        return subprocess.run([sys.executable, str(ROOT / "docker" / "healthcheck.py")], env=env,
                              capture_output=True, timeout=20).returncode

    assert healthy() == 1  # nothing listens yet
    proc = subprocess.Popen(["sh", str(ROOT / "docker" / "entrypoint.sh"), "--config",
                             str(ROOT / "config" / "server.properties")],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "entrypoint broker did not listen"
                time.sleep(0.05)
        while healthy() != 0:  # the image's HEALTHCHECK turns healthy once recovery is done
            assert proc.poll() is None and time.monotonic() < deadline, "never healthy"
            time.sleep(0.1)
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        p.produce("docker-steps", b"hello")
        assert p.flush(15) == 0
        c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "x", "enable.auto.commit": False})
        c.assign([TopicPartition("docker-steps", 0, 0)])
        m = c.poll(10)
        assert m is not None and m.error() is None and m.value() == b"hello"
        c.close()
        assert (data / "docker-steps-0").is_dir()
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
            assert 'minikafka_records_in_total{topic="docker-steps"} 1.0' in resp.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=20)[0].decode()
    assert proc.returncode == 0, out
    assert "shut down cleanly" in out
    assert str(target) in subprocess.run(
        [sys.executable, "-S", "-c", "import minikafka.broker, sys; print(minikafka.broker.__file__)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
