"""Broker processes for the benchmarks: minikafka, and Apache Kafka as its start scripts run it.

A `BrokerProc` owns one data directory and one port, so it can be stopped, killed and started again
(restart benchmarks). Kafka runs with the heap and JVM options of `kafka-server-start.sh` /
`kafka-run-class.sh` (not the smaller ones the test lab uses) and its default thread counts.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator
from unittest import mock

from .common import free_port, rss_mb
from .startup import answers_api_versions

KINDS = ("minikafka", "kafka")
# kafka-server-start.sh: KAFKA_HEAP_OPTS="-Xmx1G -Xms1G"; kafka-run-class.sh: KAFKA_JVM_PERFORMANCE_OPTS.
KAFKA_HEAP = "1G"
KAFKA_JVM_OPTS = ["-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
# Kafka's defaults for these (scripts/apache_kafka.py lowers them to 2 and 4 for the test lab).
KAFKA_OVERRIDES = {"num.network.threads": "3", "num.io.threads": "8"}
MINIKAFKA_OVERRIDES: dict[str, str] = {}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (/proc/<pid>/stat utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BrokerProc:
    """One broker process on a fixed port and data directory; start/stop/kill may repeat."""

    def __init__(self, kind: str, work_dir: Path) -> None:
        if kind not in KINDS:
            raise ValueError(kind)
        self.kind, self.work_dir = kind, work_dir
        self.port, self.controller_port = free_port(), free_port()
        self.proc: subprocess.Popen | None = None
        self._kafka = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        proc = self._kafka.proc if self._kafka else self.proc
        assert proc is not None, "not started"
        return proc.pid

    def alive(self) -> bool:
        proc = self._kafka.proc if self._kafka else self.proc
        return proc is not None and proc.poll() is None

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def start(self, timeout: float = 180.0) -> float:
        """Spawn and wait until ready (minikafka: ApiVersions answered; Kafka: the lab's probe, i.e.
        ApiVersions answered and the broker registered). Returns the seconds this took."""
        t0 = time.monotonic()
        if self.kind == "kafka":
            self._start_kafka(timeout)
        else:
            self._start_minikafka(timeout)
        return time.monotonic() - t0

    def _start_minikafka(self, timeout: float) -> None:
        data = self.work_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "minikafka.broker.cli.main", "serve", "--log-level", "warning",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}", "--override", f"log.dirs={data}"]
        for k, v in MINIKAFKA_OVERRIDES.items():
            args += ["--override", f"{k}={v}"]
        with open(self.work_dir / "broker.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if answers_api_versions(self.port):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"minikafka exited {self.proc.returncode}: {self.log_tail()}")
            time.sleep(0.002)
        self.kill()
        raise TimeoutError(f"minikafka not listening within {timeout} s")

    def _start_kafka(self, timeout: float) -> None:
        from scripts import apache_kafka
        if self._kafka is None:
            self._kafka = apache_kafka.KafkaBroker(work_dir=self.work_dir, heap=KAFKA_HEAP)
        ctl = f"127.0.0.1:{self.controller_port}"
        overrides = {**KAFKA_OVERRIDES, "controller.quorum.voters": f"1@{ctl}",
                     "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://{ctl}"}
        # KafkaBroker passes -Xmx<heap> then SERVER_JVM_OPTS[1:]: swap in the start scripts' options.
        with mock.patch.object(apache_kafka, "SERVER_JVM_OPTS", ["-Xmx", *KAFKA_JVM_OPTS]):
            self._kafka.start(port=self.port, overrides=overrides, timeout=timeout)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`."""
        if self._kafka is not None:
            self._kafka.stop(timeout)
        elif self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """kill -9."""
        if self._kafka is not None:
            self._kafka.kill()
        elif self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def log_tail(self, n: int = 2000) -> str:
        if self._kafka is not None:
            return self._kafka.log_text(n)
        with contextlib.suppress(OSError):
            return (self.work_dir / "broker.log").read_text(errors="replace")[-n:]
        return ""


@contextlib.contextmanager
def running(kind: str) -> Iterator[tuple[BrokerProc, float]]:
    """A fresh broker in a temp dir: yields (broker, spawn-to-ready seconds); removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    broker = BrokerProc(kind, work)
    try:
        yield broker, broker.start()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def describe_configs() -> list[str]:
    """Markdown bullet lines: how each broker is run."""
    kafka = " ".join([f"-Xmx{KAFKA_HEAP}", *KAFKA_JVM_OPTS])
    props = ", ".join(f"`{k}={v}`" for k, v in KAFKA_OVERRIDES.items())
    mk = ", ".join(f"`{k}={v}`" for k, v in MINIKAFKA_OVERRIDES.items()) or "none"
    return [
        f"* Apache Kafka 4.3.1, KRaft, one combined broker+controller node (`scripts/apache_kafka.py`), "
        f"JVM options of Kafka's start scripts: `{kafka}` (no GC log, no JMX); {props} (Kafka's defaults); "
        "replication factors 1, `group.initial.rebalance.delay.ms=0`. A fresh Kafka's start-to-ready "
        "includes `kafka-storage format` (a separate short JVM), as a fresh CI broker needs it.",
        f"* minikafka: `python -m minikafka.broker.cli.main serve` with defaults; overrides besides "
        f"listeners/log.dirs: {mk}; its modules byte-compiled before the run (.pyc, as `pip install` "
        "and the Docker image have them).",
    ]


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return []


@contextlib.contextmanager
def backgrounded(brokers: list[BrokerProc]) -> Iterator[dict[str, float]]:
    """The brokers' threads at nice 19 for the block (a warm JVM's GC and JIT threads then take only
    what the broker under test leaves idle), back to 0 afterwards; yields their CPU seconds meanwhile."""
    used: dict[str, float] = {}
    before = {b.kind: cpu_seconds(b.pid) for b in brokers}
    for b in brokers:
        for tid in _threads(b.pid):
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, tid, 19)
    try:
        yield used
    finally:
        for b in brokers:
            used[b.kind] = cpu_seconds(b.pid) - before[b.kind]
            for tid in _threads(b.pid):
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, tid, 0)


def alternating_rounds(brokers: dict[str, BrokerProc], rounds: int
                       ) -> Iterator[tuple[str, str, Callable[[], float]]]:
    """A warm-up round then `rounds` measured ones, the brokers' order reversed every other round; the
    body of each step runs with the other brokers backgrounded. Yields (label: "warm-up" or "round N",
    kind, the others' CPU seconds since the step began)."""
    kinds = list(brokers)
    for r in range(rounds + 1):
        for kind in (kinds if r % 2 == 0 else kinds[::-1]):
            others = [b for k, b in brokers.items() if k != kind]
            before = sum(cpu_seconds(b.pid) for b in others)
            with backgrounded(others):
                yield ("warm-up" if r == 0 else f"round {r}"), kind, \
                    lambda: sum(cpu_seconds(b.pid) for b in others) - before
