"""Benchmark helpers: start a broker subprocess on a free port with a fresh data dir."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def minikafka(overrides: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen, float]]:
    """Yields (bootstrap, process, seconds from spawn until the port accepts connections)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mk-bench-") as data:
        args = [sys.executable, "-m", "minikafka.broker.cli.main", "serve", "--log-level", "warning",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}"]
        for k, v in (overrides or {}).items():
            args += ["--override", f"{k}={v}"]
        t0 = time.monotonic()
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("broker exited")
                time.sleep(0.002)
        ready = time.monotonic() - t0
        try:
            yield f"127.0.0.1:{port}", proc, ready
        finally:
            proc.terminate()
            proc.wait(30)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
