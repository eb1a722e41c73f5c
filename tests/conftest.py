"""Shared fixtures: a real minikafka broker in a subprocess on a free loopback port, temp data dir."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """A minikafka subprocess that can be stopped (SIGTERM), killed (-9) and restarted on its data dir."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, port: int | None = None):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        args = [sys.executable, "-m", "minikafka.broker.cli", "serve",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.data_dir}"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"broker did not listen within {timeout}s:\n{self.log_text()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9: no chance to flush or write the clean-shutdown marker."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, data_dir: Path | None = None) -> BrokerProcess:
        d = data_dir or tmp_path / f"data{len(started)}"
        d.mkdir(parents=True, exist_ok=True)
        b = BrokerProcess(d, overrides)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        if b.alive():
            b.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for a whole module (tests must use distinct topic names)."""
    d = tmp_path_factory.mktemp("shared") / "data"
    d.mkdir()
    b = BrokerProcess(d).start()
    yield b
    if b.alive():
        b.stop()
    assert "Traceback" not in b.log_text(), b.log_text()
