"""What the metrics cost on the produce path: broker CPU and throughput with the admin listener off and on
(scraped every second during the run), against a baseline source tree (e.g. main before metrics).

Usage: python -m bench.metrics_overhead [--records N] [--rounds N] [--baseline /path/to/tree]
Two workloads: `bulk` (1 KiB records, big batches: bench.produce_consume's producer) and `small`
(100-byte records, one record per batch and one request in flight: a Produce request per record, where
per-request counting shows most).
Variants are interleaved round by round; the median of each is printed (broker CPU seconds of the
produce phase, from /proc via psutil, and records/s).
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tree: Path, data: Path, metrics_port: int | None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    args = [sys.executable, "-m", "minikafka.broker.cli.main", "serve", "--log-level", "warning",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}"]
    if metrics_port:
        args += ["--metrics-listener", f"http://127.0.0.1:{metrics_port}"]
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.Popen(args, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("broker did not start")
            time.sleep(0.02)


def produce(bootstrap: str, workload: str, n: int) -> None:
    if workload == "bulk":
        conf = {"linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576}
        value = b"x" * 1024
    else:
        conf = {"linger.ms": 0, "batch.num.messages": 1, "max.in.flight.requests.per.connection": 1}
        value = b"y" * 100
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False, **conf})
    for i in range(n):
        while True:
            try:
                p.produce("bench", value)
                break
            except BufferError:
                p.poll(0.005)
    assert p.flush(120) == 0


def one(tree: Path, workload: str, n: int, metrics: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        mport = free_port() if metrics else None
        proc, port = start(tree, Path(d), mport)
        stop = threading.Event()
        try:
            bs = f"127.0.0.1:{port}"
            admin = AdminClient({"bootstrap.servers": bs})
            for f in admin.create_topics([NewTopic("bench", 1, 1)]).values():
                f.result()
            produce(bs, workload, 1000)  # warm: handlers loaded, producer connected once
            time.sleep(2.0)  # the broker's background warm-up (imports, log opening) is over
            if mport:
                def scraper() -> None:
                    while not stop.wait(1.0):
                        urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read()
                threading.Thread(target=scraper, daemon=True).start()
            ps = psutil.Process(proc.pid)
            c0 = sum(ps.cpu_times()[:2])
            t0 = time.perf_counter()
            produce(bs, workload, n)
            elapsed = time.perf_counter() - t0
            cpu = sum(ps.cpu_times()[:2]) - c0
        finally:
            stop.set()
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
    return cpu, n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="source tree without metrics (its PYTHONPATH root)")
    ap.add_argument("--workloads", default="bulk,small")
    args = ap.parse_args()
    variants = [("metrics off", ROOT, False), ("metrics on", ROOT, True)]
    if args.baseline:
        variants.insert(0, ("baseline", args.baseline, False))
    for workload, n in (("bulk", args.records), ("small", args.records // 10)):
        if workload not in args.workloads.split(","):
            continue
        results: dict[str, list[tuple[float, float]]] = {name: [] for name, _t, _m in variants}
        for _ in range(args.rounds):
            for name, tree, metrics in variants:
                results[name].append(one(tree, workload, n, metrics))
        for name, runs in results.items():
            cpu = statistics.median(r[0] for r in runs)
            rps = statistics.median(r[1] for r in runs)
            print(f"{workload:5} {n:7d} records  {name:12} broker CPU {cpu:6.2f} s  "
                  f"({cpu / n * 1e6:5.1f} us/record)  {rps:9.0f} records/s", flush=True)


if __name__ == "__main__":
    main()
