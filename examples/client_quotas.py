"""Client quotas on a broker (minikafka or Apache Kafka): give the client id `slow` a 1 MB/s
producer_byte_rate, produce as fast as possible for a few seconds, and watch the broker throttle it
(librdkafka reports each response's throttle_time_ms through `throttle_cb`). Then remove the quota.

    python examples/client_quotas.py 127.0.0.1:9092

Neither confluent-kafka nor kafka-python has an admin call for quotas, so the quota is set with one
AlterClientQuotas request over a socket (kafka-python's protocol classes encode it); `kafka-configs
--alter --entity-type clients --entity-name slow --add-config producer_byte_rate=1048576` does the same.
"""
from __future__ import annotations

import socket
import struct
import sys
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin.client_quotas import (AlterClientQuotasRequest, AlterClientQuotasResponse,
                                                DescribeClientQuotasRequest, DescribeClientQuotasResponse)


def call(bootstrap: str, request, response_class, version: int = 1):
    """One request on a fresh connection; the decoded response."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        request.with_header(correlation_id=1, client_id="quota-example")
        sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = b""
        while len(body) < size:
            body += sock.recv(size - len(body))
    return response_class.decode(body, version=version, header=True)


def alter_quota(bootstrap: str, client_id: str, key: str, value: float | None) -> None:
    Entry = AlterClientQuotasRequest.EntryData
    req = AlterClientQuotasRequest(entries=[Entry(
        entity=[Entry.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[Entry.OpData(key=key, value=value or 0.0, remove=value is None)])], validate_only=False)
    for entry in call(bootstrap, req, AlterClientQuotasResponse).entries:
        if entry.error_code:
            raise SystemExit(f"AlterClientQuotas failed: {entry.error_code} {entry.error_message}")


def describe_quotas(bootstrap: str, client_id: str) -> dict[str, float]:
    C = DescribeClientQuotasRequest.ComponentData
    resp = call(bootstrap, DescribeClientQuotasRequest(
        components=[C(entity_type="client-id", match_type=0, match=client_id)], strict=True),
        DescribeClientQuotasResponse)
    return {v.key: v.value for e in resp.entries or [] for v in e.values}


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[float, int]:
    """(MB/s delivered, throttle events seen)."""
    throttles: list[int] = []
    delivered = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += len(msg.value())
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
                  "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, b"x" * 10_000, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.02)
        p.poll(0)
    p.purge()
    p.flush(2)
    return delivered[0] / seconds / 1e6, len(throttles)


def main(bootstrap: str, seconds: float = 6.0) -> None:
    topic = f"quota-example-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    alter_quota(bootstrap, "slow", "producer_byte_rate", 1024 * 1024)
    print("quotas of 'slow':", describe_quotas(bootstrap, "slow"))
    try:
        rate, throttled = produce_for(bootstrap, topic, "slow", seconds)
        print(f"client id 'slow': {rate:.2f} MB/s, {throttled} throttled responses")
        rate, throttled = produce_for(bootstrap, topic, "fast", seconds)
        print(f"client id 'fast': {rate:.2f} MB/s, {throttled} throttled responses")
    finally:
        alter_quota(bootstrap, "slow", "producer_byte_rate", None)
    print("after removal:", describe_quotas(bootstrap, "slow"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092")
