"""Produce and consume throughput with librdkafka (confluent-kafka), 1 KiB records, acks=all.

Usage: python -m bench.produce_consume [--records N] [--partitions 1,6] [--bootstrap host:port] [--idempotent]
       [--max-in-flight N] [--compression none|gzip|snappy|lz4|zstd] [--runs N]
Without --bootstrap a fresh minikafka is started per run. Prints MB/s and records/s. --idempotent
produces with enable.idempotence=true (sequence checks on every batch) instead of false. librdkafka
caps an idempotent producer at 5 in-flight requests per broker, so compare the broker-side cost of
the sequence checks with `--max-in-flight 5` on both runs. --compression sets the producer's
`compression.type`; records are then drawn from 256 distinct hex-text payloads (about 2:1 compressible),
so compressed batches do not collapse to nothing. --runs N repeats each measurement (a fresh broker per
run) and prints every run plus the median.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .common import minikafka

RECORD = 1024


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()


def payloads(compression: str) -> list[bytes]:
    if compression == "none":
        return [b"x" * RECORD]
    return [os.urandom(RECORD // 2).hex().encode() for _ in range(256)]


def produce(bootstrap: str, topic: str, n: int, idempotent: bool = False, max_in_flight: int | None = None,
            compression: str = "none") -> float:
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": idempotent,
            "compression.type": compression}
    if max_in_flight is not None:
        conf["max.in.flight.requests.per.connection"] = max_in_flight
    producer = Producer(conf)
    pool = payloads(compression)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, pool[i & 255] if len(pool) > 1 else pool[0])
                break
            except BufferError:
                producer.poll(0.005)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - t0
    assert remaining == 0, f"{remaining} records not delivered"
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 1_048_576})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        msgs = consumer.consume(10_000, 5.0)
        if not msgs:
            raise RuntimeError(f"consumer stalled at {got}/{n}")
        got += sum(1 for m in msgs if not m.error())
    elapsed = time.perf_counter() - t0
    consumer.close()
    return elapsed


def run(bootstrap: str | None, records: int, partitions: int, idempotent: bool = False,
        max_in_flight: int | None = None, compression: str = "none") -> dict[str, float]:
    ctx = contextlib.nullcontext((bootstrap, None, float("nan"))) if bootstrap else minikafka()
    with ctx as (bs, _proc, _ready):
        topic = f"bench-{partitions}-{time.time_ns()}"
        create_topic(bs, topic, partitions)
        p = produce(bs, topic, records, idempotent, max_in_flight, compression)
        c = consume(bs, topic, partitions, records)
    mb = records * RECORD / 1e6
    return {"partitions": partitions, "records": records, "produce_MBps": mb / p, "produce_rps": records / p,
            "consume_MBps": mb / c, "consume_rps": records / c}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", default="1,6")
    ap.add_argument("--bootstrap")
    ap.add_argument("--idempotent", action="store_true", help="enable.idempotence=true")
    ap.add_argument("--max-in-flight", type=int, help="max.in.flight.requests.per.connection")
    ap.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                    help="producer compression.type")
    ap.add_argument("--runs", type=int, default=1, help="repeat each measurement, report the median")
    args = ap.parse_args()
    if not args.bootstrap:  # which broker code the subprocess imports (PYTHONPATH may point elsewhere)
        where = subprocess.run([sys.executable, "-c", "import minikafka.broker.cli.main as m; print(m.__file__)"],
                               capture_output=True, text=True).stdout.strip()
        print(f"broker code: {where}")
    for parts in (int(x) for x in args.partitions.split(",")):
        produced, consumed = [], []
        for _ in range(args.runs):
            r = run(args.bootstrap, args.records, parts, args.idempotent, args.max_in_flight, args.compression)
            produced.append(r["produce_MBps"])
            consumed.append(r["consume_MBps"])
            print(f"compression={args.compression} idempotent={args.idempotent} partitions={parts} "
                  f"records={r['records']} produce {r['produce_MBps']:.1f} MB/s ({r['produce_rps']:.0f} rec/s)  "
                  f"consume {r['consume_MBps']:.1f} MB/s ({r['consume_rps']:.0f} rec/s)", flush=True)
        if args.runs > 1:
            print(f"median compression={args.compression} partitions={parts} runs={args.runs}: "
                  f"produce {statistics.median(produced):.1f} MB/s (min {min(produced):.1f}, max {max(produced):.1f})  "
                  f"consume {statistics.median(consumed):.1f} MB/s", flush=True)


if __name__ == "__main__":
    main()
