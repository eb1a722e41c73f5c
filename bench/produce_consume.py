"""Produce and consume throughput with librdkafka (confluent-kafka), 1 KiB records, acks=all.

Usage: python -m bench.produce_consume [--records N] [--partitions 1,6] [--bootstrap host:port] [--idempotent]
       [--max-in-flight N]
Without --bootstrap a fresh minikafka is started per run. Prints MB/s and records/s. --idempotent
produces with enable.idempotence=true (sequence checks on every batch) instead of false. librdkafka
caps an idempotent producer at 5 in-flight requests per broker, so compare the broker-side cost of
the sequence checks with `--max-in-flight 5` on both runs.
"""
from __future__ import annotations

import argparse
import contextlib
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .common import minikafka

RECORD = 1024


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()


def produce(bootstrap: str, topic: str, n: int, idempotent: bool = False, max_in_flight: int | None = None) -> float:
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": idempotent}
    if max_in_flight is not None:
        conf["max.in.flight.requests.per.connection"] = max_in_flight
    producer = Producer(conf)
    payload = b"x" * RECORD
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, payload)
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
        max_in_flight: int | None = None) -> dict[str, float]:
    ctx = contextlib.nullcontext((bootstrap, None, float("nan"))) if bootstrap else minikafka()
    with ctx as (bs, _proc, _ready):
        topic = f"bench-{partitions}-{time.time_ns()}"
        create_topic(bs, topic, partitions)
        p = produce(bs, topic, records, idempotent, max_in_flight)
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
    args = ap.parse_args()
    for parts in (int(x) for x in args.partitions.split(",")):
        r = run(args.bootstrap, args.records, parts, args.idempotent, args.max_in_flight)
        print(f"idempotent={args.idempotent} partitions={parts} records={r['records']} produce {r['produce_MBps']:.1f} MB/s "
              f"({r['produce_rps']:.0f} rec/s)  consume {r['consume_MBps']:.1f} MB/s ({r['consume_rps']:.0f} rec/s)")


if __name__ == "__main__":
    main()
