"""Transactions with librdkafka (confluent-kafka): transactions per second and commit latency (p50/p99)
for transactions of 1, 10 and 100 records of 1 KiB spread over 3 partitions, then read_committed
consume throughput over 100-record transactions, one in five aborted (the consumer drops those
with the aborted-transaction index).

Usage: python -m bench.transactions [--count N] [--sizes 1,10,100] [--brokers minikafka,kafka]
       [--bootstrap host:port] [--consume-records N]
Without --bootstrap each broker kind is started fresh (Apache Kafka from the reference lab). A
transaction = begin, produce the records, commit_transaction (AddPartitionsToTxn, Produce, EndTxn
and the coordinator's markers); "commit" latency is the commit_transaction call alone.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from typing import Iterator

from confluent_kafka import Consumer, Producer, TopicPartition

from .produce_consume import RECORD, create_topic

PARTITIONS = 3


@contextlib.contextmanager
def broker(kind: str, bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from .brokers import running
    with running(kind) as (b, _ready):
        yield b.bootstrap


def run_transactions(bs: str, topic: str, size: int, count: int) -> dict[str, float]:
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"bench-{size}-{time.time_ns()}", "linger.ms": 0})
    p.init_transactions(30)
    payload = b"x" * RECORD
    for _ in range(3):  # warm-up: partitions known, connections open
        p.begin_transaction()
        p.produce(topic, payload, partition=0)
        p.commit_transaction(30)
    commits: list[float] = []
    t0 = time.perf_counter()
    for _ in range(count):
        p.begin_transaction()
        for i in range(size):
            p.produce(topic, payload, partition=i % PARTITIONS)
        c0 = time.perf_counter()
        p.commit_transaction(30)
        commits.append(time.perf_counter() - c0)
    elapsed = time.perf_counter() - t0
    q = statistics.quantiles(commits, n=100)
    return {"txn/s": count / elapsed, "records/s": count * size / elapsed,
            "commit p50 ms": q[49] * 1000, "commit p99 ms": q[98] * 1000}


def fill_transactional(bs: str, topic: str, records: int, size: int = 100) -> None:
    """`records` records in committed transactions of `size`, every fifth transaction aborted."""
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"bench-fill-{time.time_ns()}", "linger.ms": 5,
                  "batch.size": 1_000_000})
    p.init_transactions(30)
    payload = b"x" * RECORD
    for t in range(records // size):
        p.begin_transaction()
        for i in range(size):
            p.produce(topic, payload, partition=i % PARTITIONS)
        if t % 5 == 4:
            p.flush(30)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)


def consume_read_committed(bs: str, topic: str, expected: int) -> float:
    """MB/s for a read_committed consumer reading `expected` visible records from the beginning,
    timed from the first record (client start-up excluded)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-unused", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 10})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    n = size = 0
    t0 = None
    deadline = time.perf_counter() + 120
    while n < expected and time.perf_counter() < deadline:
        for m in c.consume(num_messages=10_000, timeout=0.5):
            if not m.error():
                t0 = t0 or time.perf_counter()
                n += 1
                size += len(m.value())
    elapsed = time.perf_counter() - (t0 or 0)
    c.close()
    if n < expected:
        raise RuntimeError(f"read_committed consumer got {n}/{expected}")
    return size / elapsed / 1e6


def run(kind: str, bootstrap: str | None, sizes: list[int], count: int,
        consume_records: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with broker(kind, bootstrap) as bs:
        topic = f"bench-txn-{time.time_ns()}"
        create_topic(bs, topic, PARTITIONS)
        for size in sizes:
            out[f"{size} rec"] = run_transactions(bs, topic, size, count)
        topic = f"bench-rc-{time.time_ns()}"
        create_topic(bs, topic, PARTITIONS)
        fill_transactional(bs, topic, consume_records)
        visible = consume_records - (consume_records // 100 // 5) * 100
        out["read_committed"] = {"MB/s": consume_read_committed(bs, topic, visible)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200, help="transactions per size")
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--brokers", default="minikafka")
    ap.add_argument("--bootstrap")
    ap.add_argument("--consume-records", type=int, default=50_000,
                    help="records written in 100-record transactions (1 in 5 aborted) for the consume run")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    for kind in args.brokers.split(","):
        res = run(kind, args.bootstrap, sizes, args.count, args.consume_records)
        for name, metrics in res.items():
            print(f"{kind:9s} {name:15s} " + "  ".join(f"{k}={v:.1f}" for k, v in metrics.items()), flush=True)


if __name__ == "__main__":
    main()
