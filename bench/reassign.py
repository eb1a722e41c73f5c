"""How fast a replica move copies a partition: three-node minikafka vs three-node Apache Kafka (issue 16).

    .venv/bin/python -m bench.reassign [--mb 200] [--kinds minikafka,kafka] [--rounds 2]

Per cluster kind (bench/cluster.py's kinds: the same fail-over timeouts, KRaft combined mode, loopback):
a topic with one partition on node 1 only is filled with `--mb` MB of 10 KB records (acks=1), then
AlterPartitionReassignments adds node 2 (target [2, 1]); the move is timed from the request until
ListPartitionReassignments no longer lists it (polled every 50 ms): node 2 copied the whole log from
the leader and joined the ISR. Each round moves a fresh topic; the table gives every round and MB/s.
No throttle; the producer has stopped before the move starts.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import KafkaKind, MiniKafkaKind  # noqa: E402

RECORD = b"r" * 10_000


def fill(bootstrap: str, topic: str, mb: int) -> int:
    """Create `topic` on node 1 only and write `mb` MB to it; the bytes written."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1]])])[topic].result(30)
    deadline = time.monotonic() + 30
    while admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader != 1:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: no leader")
        time.sleep(0.1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 1 << 20})
    count = mb * 1_000_000 // len(RECORD)
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, RECORD, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records left unsent")
    return count * len(RECORD)


def move(bootstrap: str, topic: str) -> float:
    """Seconds from AlterPartitionReassignments (add node 2) until the move is no longer listed."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="bench-reassign")
    try:
        t0 = time.monotonic()
        result = admin.alter_partition_reassignments({TopicPartition(topic, 0): [2, 1]}, timeout_ms=30000)
        if any(err is not None for err in result.values()):
            raise RuntimeError(f"reassignment refused: {result}")
        while admin.list_partition_reassignments({topic: [0]}):
            if time.monotonic() - t0 > 600:
                raise RuntimeError("the move did not complete in 10 minutes")
            time.sleep(0.05)
        return time.monotonic() - t0
    finally:
        admin.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kinds", default="minikafka,kafka")
    args = ap.parse_args()
    kinds = {"minikafka": MiniKafkaKind, "kafka": KafkaKind}
    print("| cluster | round | MB | move (s) | MB/s |")
    print("|---|---:|---:|---:|---:|")
    for name in args.kinds.split(","):
        with kinds[name]() as k:
            for r in range(1, args.rounds + 1):
                topic = f"bench-move-{r}"
                size = fill(k.bootstrap, topic, args.mb)
                seconds = move(k.bootstrap, topic)
                print(f"| {name} | {r} | {size / 1e6:.0f} | {seconds:.2f} | {size / 1e6 / seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
