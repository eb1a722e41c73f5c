"""Throughput over TLS next to PLAINTEXT: 1 KiB records, acks=all, one partition, confluent-kafka.

Usage: python -m bench.tls [--records N] [--kafka]
One broker with a PLAINTEXT and an SSL listener (PEM keystore, TLS 1.3, no client auth; a test CA
made on the fly); each listener gets its own topic, produced then consumed through that listener.
--kafka runs the same against the Apache Kafka lab (scripts/apache_kafka.py) as well.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .common import free_port

RECORD = 1024
ROOT = Path(__file__).resolve().parent.parent


def _client(bootstrap: str, tls: bool, ca: str) -> dict:
    conf = {"bootstrap.servers": bootstrap}
    if tls:
        conf.update({"security.protocol": "SSL", "ssl.ca.location": ca})
    return conf


def measure(conf: dict, records: int) -> tuple[float, float]:
    """(produce MB/s, consume MB/s) through one listener."""
    topic = f"tls-bench-{time.time_ns()}"
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result()
    p = Producer({**conf, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": False})
    value = b"x" * RECORD
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.005)
    assert p.flush(120) == 0
    produce_s = time.perf_counter() - t0
    c = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 1_048_576})
    c.assign([TopicPartition(topic, 0, 0)])
    got, t0 = 0, time.perf_counter()
    while got < records:
        msgs = c.consume(10_000, 5.0)
        if not msgs:
            raise RuntimeError(f"consumer stalled at {got}/{records}")
        got += sum(1 for m in msgs if not m.error())
    consume_s = time.perf_counter() - t0
    c.close()
    mb = records * RECORD / 1e6
    return mb / produce_s, mb / consume_s


def run_minikafka(pki, records: int) -> dict[str, tuple[float, float]]:
    from tests.conftest import BrokerProcess
    plain, ssl_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="mk-tls-bench-") as d:
        (Path(d) / "data").mkdir()
        b = BrokerProcess(Path(d) / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem")}, port=plain).start()
        try:
            return {"PLAINTEXT": measure(_client(f"127.0.0.1:{plain}", False, ""), records),
                    "SSL": measure(_client(f"127.0.0.1:{ssl_port}", True, pki.path("ca.pem")), records)}
        finally:
            b.stop()


def run_kafka(pki, records: int) -> dict[str, tuple[float, float]]:
    from scripts.apache_kafka import KafkaBroker
    kb = KafkaBroker(heap="1g").start(extra_listeners={"SSL": "SSL"}, timeout=180, overrides={
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem")})
    try:
        return {"PLAINTEXT": measure(_client(kb.bootstrap, False, ""), records),
                "SSL": measure(_client(f"127.0.0.1:{kb.listener_port('SSL')}", True, pki.path("ca.pem")), records)}
    finally:
        kb.stop()
        kb.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--kafka", action="store_true", help="also measure Apache Kafka (the lab)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.tls_certs import Pki
    with tempfile.TemporaryDirectory(prefix="tls-bench-pki-") as d:
        pki = Pki(Path(d))
        brokers = [("minikafka", run_minikafka)] + ([("kafka", run_kafka)] if args.kafka else [])
        for name, fn in brokers:
            for listener, (prod, cons) in fn(pki, args.records).items():
                print(f"{name:9s} {listener:9s} records={args.records} produce {prod:7.1f} MB/s  "
                      f"consume {cons:7.1f} MB/s", flush=True)


if __name__ == "__main__":
    main()
