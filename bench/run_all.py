"""Side-by-side benchmarks: minikafka vs Apache Kafka, alternating (A B A B ...), medians, ratios.

    python -m bench.run_all [--rounds 3] [--records 200000] [--brokers minikafka,kafka] [--out BENCHMARKS.md]

Each round starts each broker fresh (one at a time), measures start-to-ready and idle RSS, then runs
the workloads below against it and stops it. Results: a Markdown table (medians over rounds and the
ratio minikafka/Kafka) written into BENCHMARKS.md between markers, and bench/results/ratios.png.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import platform
import statistics
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from confluent_kafka import Consumer, Producer, TopicPartition

from .common import minikafka, rss_mb
from .produce_consume import RECORD, create_topic

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

# metric name -> (unit, higher is better)
METRICS: dict[str, tuple[str, bool]] = {
    "produce 1p acks=all": ("MB/s", True),
    "produce 6p acks=all": ("MB/s", True),
    "produce 6p idempotent": ("MB/s", True),
    "consume 6p read_committed": ("MB/s", True),
    "e2e p99 @10MB/s": ("ms", False),
    "transactions (10 rec, 3p)": ("txn/s", True),
    "txn commit p99": ("ms", False),
    "start-to-ready": ("ms", False),
    "idle RSS": ("MB", False),
    "loaded RSS": ("MB", False),
}


@contextlib.contextmanager
def start_broker(kind: str) -> Iterator[tuple[str, int, float]]:
    """Yields (bootstrap, pid, start-to-ready seconds)."""
    if kind == "minikafka":
        with minikafka() as (bs, proc, ready):
            yield bs, proc.pid, ready
        return
    from scripts.apache_kafka import KafkaBroker
    kb = KafkaBroker()
    t0 = time.monotonic()
    kb.start(timeout=120)
    ready = time.monotonic() - t0
    try:
        yield kb.bootstrap, kb.proc.pid, ready
    finally:
        kb.stop()
        kb.cleanup()


class RssSampler:
    """Peak RSS of a process, sampled every 100 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return

    def __enter__(self) -> "RssSampler":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def produce_mbps(bs: str, topic: str, n: int, idempotent: bool) -> float:
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": idempotent})
    payload = b"x" * RECORD
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.005)
    assert p.flush(180) == 0
    return n * RECORD / 1e6 / (time.perf_counter() - t0)


def consume_mbps(bs: str, topic: str, partitions: int, n: int) -> float:
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "fetch.max.bytes": 52_428_800})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, t0 = 0, time.perf_counter()
    while got < n:
        msgs = c.consume(10_000, 10.0)
        if not msgs:
            raise RuntimeError(f"consumer stalled at {got}/{n}")
        got += sum(1 for m in msgs if not m.error())
    elapsed = time.perf_counter() - t0
    c.close()
    return n * RECORD / 1e6 / elapsed


def e2e_p99_ms(bs: str, topic: str, seconds: float = 5.0, mbps: float = 10.0) -> float:
    """Send 1 KiB records at a fixed rate; p99 of (consume time - send time) in ms."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-e2e", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 1})
    rate = mbps * 1e6 / RECORD
    n = int(rate * seconds)
    latencies: list[float] = []
    done = threading.Event()
    # Warm up: the measured window starts only once a first record made the whole trip.
    p.produce(topic, b"warmup")
    p.flush(30)
    deadline = time.time() + 30
    while time.time() < deadline and not any(not m.error() for m in c.consume(10, 0.5)):
        pass

    def consume() -> None:
        # poll() returns as soon as one record is there (consume(n, t) would wait to fill n)
        while len(latencies) < n and not done.is_set():
            m = c.poll(0.1)
            if m is not None and not m.error():
                latencies.append(time.time() - float(m.value()[:20]))
    t = threading.Thread(target=consume, daemon=True)
    t.start()
    pad = b"x" * (RECORD - 20)
    t0 = time.perf_counter()
    for i in range(n):
        target = t0 + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        p.produce(topic, b"%20.6f" % time.time() + pad)
        p.poll(0)
    p.flush(60)
    t.join(30)
    done.set()
    c.close()
    if len(latencies) < n * 0.99:
        raise RuntimeError(f"e2e: only {len(latencies)}/{n} records arrived")
    return statistics.quantiles(latencies, n=100)[98] * 1000


def transactions(bs: str, topic: str, count: int = 300) -> tuple[float, float]:
    """(transactions/s, commit p99 ms) for 10-record transactions over 3 partitions."""
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"bench-{time.time_ns()}", "linger.ms": 0})
    p.init_transactions(30)
    commits: list[float] = []
    t0 = time.perf_counter()
    for _ in range(count):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, b"x" * 100, partition=i % 3)
        c0 = time.perf_counter()
        p.commit_transaction(30)
        commits.append(time.perf_counter() - c0)
    elapsed = time.perf_counter() - t0
    return count / elapsed, statistics.quantiles(commits, n=100)[98] * 1000


def run_one(kind: str, records: int, with_txn: bool) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    with start_broker(kind) as (bs, pid, ready):
        out["start-to-ready"] = ready * 1000
        time.sleep(1.0)
        out["idle RSS"] = rss_mb(pid)
        with RssSampler(pid) as rss:
            for name, parts, idem in (("produce 1p acks=all", 1, False), ("produce 6p acks=all", 6, False),
                                      ("produce 6p idempotent", 6, True)):
                topic = f"b{parts}{int(idem)}-{time.time_ns()}"
                create_topic(bs, topic, parts)
                out[name] = produce_mbps(bs, topic, records, idem)
            out["consume 6p read_committed"] = consume_mbps(bs, topic, 6, records)
            topic = f"e2e-{time.time_ns()}"
            create_topic(bs, topic, 1)
            out["e2e p99 @10MB/s"] = e2e_p99_ms(bs, topic)
            if with_txn:
                topic = f"txn-{time.time_ns()}"
                create_topic(bs, topic, 3)
                out["transactions (10 rec, 3p)"], out["txn commit p99"] = transactions(bs, topic)
        out["loaded RSS"] = rss.peak
    return out


def supports_transactions(kind: str) -> bool:
    if kind != "minikafka":
        return True
    from minikafka.broker.registry import HANDLERS
    from minikafka.broker import handlers  # noqa: F401
    return 26 in HANDLERS  # EndTxn


def fmt(v: float | None) -> str:
    return "n/a" if v is None else (f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}")


def render(medians: dict[str, dict[str, float | None]], meta: str) -> str:
    kinds = list(medians)
    lines = [meta, "", "| metric | unit | " + " | ".join(kinds) + (" | minikafka/Kafka |" if len(kinds) == 2 else " |"),
             "| --- | --- | " + " | ".join("---:" for _ in kinds) + (" | ---: |" if len(kinds) == 2 else " |")]
    for name, (unit, _hib) in METRICS.items():
        vals = [medians[k].get(name) for k in kinds]
        row = f"| {name} | {unit} | " + " | ".join(fmt(v) for v in vals)
        if len(kinds) == 2:
            a, b = vals
            row += " | " + (f"{a / b:.2f}" if a is not None and b else "n/a")
        lines.append(row + " |")
    return "\n".join(lines)


def chart(medians: dict[str, dict[str, float | None]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names, ratios = [], []
    for name, (_unit, hib) in METRICS.items():
        a, b = medians["minikafka"].get(name), medians["kafka"].get(name)
        if a is None or not b:
            continue
        names.append(name)
        ratios.append(a / b if hib else b / a)  # > 1 means minikafka is better
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.barh(names, ratios, color=["tab:green" if r >= 1 else "tab:orange" for r in ratios])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("minikafka relative to Apache Kafka (>1 = minikafka better)")
    ax.invert_yaxis()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--brokers", default="minikafka,kafka")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    args = ap.parse_args()
    kinds = args.brokers.split(",")
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        for kind in kinds:
            res = run_one(kind, args.records, supports_transactions(kind))
            runs[kind].append(res)
            print(f"round {r + 1} {kind}: " + ", ".join(f"{k}={fmt(v)}" for k, v in res.items()), flush=True)
    medians = {k: {m: (statistics.median(vals) if (vals := [x[m] for x in runs[k] if x.get(m) is not None])
                       else None) for m in METRICS} for k in kinds}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps({"runs": runs, "medians": medians}, indent=1))
    meta = (f"Measured {datetime.date.today()} on {platform.node() or 'this machine'} "
            f"({platform.machine()}, {__import__('os').cpu_count()} cores, Python {platform.python_version()}); "
            f"command: `python -m bench.run_all --rounds {args.rounds} --records {args.records}`; "
            f"medians of {args.rounds} alternating rounds; 1 KiB records; clients and broker on one machine.")
    table = render(medians, meta)
    print(table)
    if "kafka" in kinds and "minikafka" in kinds:
        chart(medians, RESULTS / "ratios.png")
    out = Path(args.out)
    begin, end = "<!-- bench:run_all:begin -->", "<!-- bench:run_all:end -->"
    text = out.read_text() if out.exists() else "# Benchmarks\n\n" + begin + "\n" + end + "\n"
    if begin not in text:
        text += "\n" + begin + "\n" + end + "\n"
    head, rest = text.split(begin, 1)
    _old, tail = rest.split(end, 1)
    out.write_text(head + begin + "\n" + table + "\n" + end + tail)


if __name__ == "__main__":
    main()
