"""One librdkafka producer of the client-defaults matrix (bench/matrix.py), run as its own process so
that several producers do not share a GIL.

    python -m bench.matrix_producer BOOTSTRAP TOPIC RECORDS RECORD_SIZE [key=value ...]

The key=value pairs are the only settings besides bootstrap.servers: everything else is librdkafka's
default. A tenth of the records (at least one) go first as a warm-up (connections, metadata, the
broker's first batches), flushed, then the rest are timed. Prints one JSON line:
{"records", "seconds", "p50_ms", "p99_ms"}; latency is librdkafka's per-record msg.latency() (produce()
to delivery report) of every 16th record.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

from confluent_kafka import KafkaException, Producer

SAMPLE_EVERY = 16


def _produce(p: Producer, topic: str, payload: bytes, n: int, on_delivery) -> None:
    for i in range(n):
        while True:
            try:
                if i % SAMPLE_EVERY == 0:
                    p.produce(topic, payload, on_delivery=on_delivery)
                else:
                    p.produce(topic, payload)
                break
            except BufferError:  # the client's queue is full: serve delivery reports and retry
                p.poll(0.001)
    left = p.flush(300)
    if left:
        raise KafkaException(f"{left} records not acknowledged")


def main(argv: list[str]) -> int:
    bootstrap, topic, records, size, *props = argv
    n, size = int(records), int(size)
    config: dict[str, object] = {"bootstrap.servers": bootstrap}
    for prop in props:
        key, _, value = prop.partition("=")
        config[key] = value
    latencies: list[float] = []
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            latencies.append(msg.latency())
    p = Producer(config)
    payload = os.urandom(size)
    warmup = max(1, n // 10)
    _produce(p, topic, payload, warmup, on_delivery)
    latencies.clear()
    timed = n - warmup
    t0 = time.perf_counter()
    _produce(p, topic, payload, timed, on_delivery)
    seconds = time.perf_counter() - t0
    if errors:
        raise KafkaException(f"{len(errors)} delivery errors, first: {errors[0]}")
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    print(json.dumps({"records": timed, "seconds": seconds, "p50_ms": quantiles[49] * 1000,
                      "p99_ms": quantiles[98] * 1000}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
