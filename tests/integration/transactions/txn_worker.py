"""A consume-transform-produce worker (confluent-kafka): reads `input` from the group's committed
offsets with read_committed, writes transform(value) to `output` and the consumed offsets to the group
inside one transaction per batch (send_offsets_to_transaction), until the input is exhausted.

Run as a process (`python -m tests.integration.transactions.txn_worker ... --crash-after N`) it can die like a
kill -9 right before its (N+1)th commit, with that transaction's records and offsets already sent."""
from __future__ import annotations

import argparse
import os
import sys


def transform(value: bytes) -> bytes:
    return b"T(" + value + b")"


def committed_offsets(consumer, topic: str, partitions: int, attempts: int = 60):
    """consumer.committed(), retried while a fresh Kafka is still creating/loading __consumer_offsets."""
    import time

    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    for attempt in range(attempts):
        try:
            return consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        except KafkaException as exc:
            retriable = exc.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                               KafkaError.COORDINATOR_NOT_AVAILABLE)
            if not retriable or attempt == attempts - 1:
                raise
            time.sleep(0.5)


def run(bootstrap: str, input_topic: str, output_topic: str, partitions: int, group: str, txn_id: str,
        batch: int = 50, crash_after: int | None = None, timeout: float = 60.0) -> int:
    """Process until every input partition is at its end; returns the number of records processed."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50})
    committed = committed_offsets(consumer, input_topic, partitions)
    consumer.assign([TopicPartition(input_topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                     for tp in committed])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(30)
    processed = commits = 0
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(eof) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {txn_id} did not finish within {timeout}s")
            msgs = []
            for m in consumer.consume(num_messages=batch, timeout=0.3):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise RuntimeError(str(m.error()))
                eof.discard(m.partition())
                msgs.append(m)
            if not msgs:
                continue
            producer.begin_transaction()
            next_offsets: dict[int, int] = {}
            for m in msgs:
                producer.produce(output_topic, key=m.key(), value=transform(m.value()), partition=m.partition())
                next_offsets[m.partition()] = m.offset() + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(input_topic, p, o) for p, o in next_offsets.items()],
                consumer.consumer_group_metadata(), 30)
            if crash_after is not None and commits == crash_after:
                producer.flush(30)
                os._exit(3)  # dies with the transaction open: no abort, no close
            producer.commit_transaction(30)
            commits += 1
            processed += len(msgs)
    finally:
        consumer.close()
    return processed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "txn_id"):
        ap.add_argument(name)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--crash-after", type=int)
    a = ap.parse_args(argv)
    n = run(a.bootstrap, a.input, a.output, a.partitions, a.group, a.txn_id, a.batch, a.crash_after)
    print(f"processed={n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
