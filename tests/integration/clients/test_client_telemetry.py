"""Client telemetry (KIP-714) end to end: GetTelemetrySubscriptions / PushTelemetry over the wire with
Kafka's answers (a new client instance id, the subscription, throttling, unknown subscription ids,
codecs, size, terminating pushes), and what minikafka adds: the pushed OTLP metrics on /metrics,
from raw pushes, from the Java client (enable.metrics.push=true by default in 4.x) and from
librdkafka (confluent-kafka).

minikafka_only: a stock Kafka broker advertises GetTelemetrySubscriptions and PushTelemetry only when a
metrics reporter implementing ClientTelemetry is installed (none ships with Kafka), so a plain lab
Kafka neither serves these APIs nor has a /metrics listener to compare with.
"""
from __future__ import annotations

import gzip
import subprocess
import sys
import time
import uuid

import pytest
from kafka.protocol.admin import IncrementalAlterConfigsRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from minikafka.broker.ops.client_telemetry import kafka_uuid_text
from minikafka.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from tests.conftest import ROOT
from tests.integration.robustness.test_metrics_http import metrics_broker, scrape, wait_ready
from tests.support.helpers import RawClient

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

pytestmark = pytest.mark.minikafka_only

R = IncrementalAlterConfigsRequest.AlterConfigsResource
C = R.AlterableConfig
ZERO = uuid.UUID(int=0)
THROTTLED, INVALID_REQUEST, UNSUPPORTED_COMPRESSION, INVALID_RECORD = 89, 42, 76, 87
UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE = 117, 118


@pytest.fixture()
def telemetry_broker(broker_factory):
    b, port = metrics_broker(broker_factory, **{"telemetry.max.bytes": "20000"})
    wait_ready(port)
    return b, port


def subscribe(bootstrap: str, name: str, **configs: str) -> None:
    with RawClient(bootstrap) as c:
        resp = c.request(IncrementalAlterConfigsRequest(resources=[R(
            resource_type=16, resource_name=name,
            configs=[C(name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items()])],
            validate_only=False), 1)
        assert resp.responses[0].error_code == 0, resp


def get(c: RawClient, instance=ZERO):
    return c.request(GetTelemetrySubscriptionsRequest(client_instance_id=instance), 0,
                     GetTelemetrySubscriptionsResponse)


def push(c: RawClient, instance, subscription: int, payload: bytes = b"", compression: int = 0,
         terminating: bool = False) -> int:
    return c.request(PushTelemetryRequest(client_instance_id=instance, subscription_id=subscription,
                                          terminating=terminating, compression_type=compression, metrics=payload),
                     0, PushTelemetryResponse).error_code


def otlp(value: float, counter: float) -> bytes:
    attrs = [KeyValue(key="topic", value=AnyValue(string_value="orders")),
             KeyValue(key="node.id", value=AnyValue(int_value=1))]
    data = MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[
        Metric(name="org.apache.kafka.producer.record.queue.time.avg",
               gauge=Gauge(data_points=[NumberDataPoint(as_double=value, attributes=attrs)])),
        Metric(name="org.apache.kafka.producer.request.count",
               sum=Sum(is_monotonic=True, aggregation_temporality=1,
                       data_points=[NumberDataPoint(as_int=int(counter), attributes=attrs)])),
    ])])])
    return data.SerializeToString()


def test_subscription_push_and_metrics(telemetry_broker):
    b, port = telemetry_broker
    subscribe(b.bootstrap, "raw-fast", metrics="org.apache.kafka.producer.", interval_ms="300",
              match="client_id=raw-.*")
    with RawClient(b.bootstrap, client_id="raw-app") as c:
        first = get(c)
        assert first.error_code == 0
        instance = first.client_instance_id
        assert instance not in (None, ZERO)
        assert first.requested_metrics == ["org.apache.kafka.producer."]
        assert first.push_interval_ms == 300 and first.telemetry_max_bytes == 20000 and first.delta_temporality
        assert sorted(first.accepted_compression_types) == [1, 2, 3, 4]
        # asking again before the interval: throttled
        assert get(c, instance).error_code == THROTTLED
        # the first push after a Get is taken (gzip); the next one, too soon, is throttled
        assert push(c, instance, first.subscription_id, gzip.compress(otlp(2.5, 3)), compression=1) == 0
        assert push(c, instance, first.subscription_id, otlp(1.0, 1)) == THROTTLED
        time.sleep(0.35)
        assert push(c, instance, first.subscription_id, otlp(4.0, 2)) == 0  # deltas add up
        samples = scrape(port)
        labels = {"client_instance_id": kafka_uuid_text(instance), "client_id": "raw-app", "topic": "orders",
                  "node_id": "1"}
        gauge = samples.get(("minikafka_client_org_apache_kafka_producer_record_queue_time_avg",
                             frozenset(labels.items())))
        counter = samples.get(("minikafka_client_org_apache_kafka_producer_request_count_total",
                               frozenset(labels.items())))
        assert (gauge, counter) == (4.0, 5.0), {k: v for k, v in samples.items() if "minikafka_client" in k[0]}
        time.sleep(0.35)
        # a push naming another subscription id; an unknown codec; too large
        assert push(c, instance, first.subscription_id + 1, otlp(1, 1)) == UNKNOWN_SUBSCRIPTION_ID
        time.sleep(0.35)
        assert push(c, instance, first.subscription_id, otlp(1, 1), compression=9) == UNSUPPORTED_COMPRESSION
        time.sleep(0.35)
        assert push(c, instance, first.subscription_id, b"x" * 20001) == TELEMETRY_TOO_LARGE
        time.sleep(0.35)
        # bytes that are no OTLP: INVALID_RECORD (Kafka's answer when its receiver fails)
        assert push(c, instance, first.subscription_id, b"\xff\xff\xff\xff") == INVALID_RECORD
        # a terminating push is taken at once; any push after it is INVALID_REQUEST
        assert push(c, instance, first.subscription_id, otlp(1, 1), terminating=True) == 0
        time.sleep(0.35)
        assert push(c, instance, first.subscription_id, otlp(1, 1)) == INVALID_REQUEST
        # the reserved ids are refused
        assert push(c, ZERO, 0) == INVALID_REQUEST


def test_no_matching_subscription_is_the_empty_subscription(telemetry_broker):
    b, _port = telemetry_broker
    subscribe(b.bootstrap, "only-others", metrics="*", interval_ms="1000", match="client_id=someone-else")
    with RawClient(b.bootstrap, client_id="unmatched") as c:
        resp = get(c)
        assert resp.error_code == 0 and resp.requested_metrics == [] and resp.push_interval_ms == 300000
    with RawClient(b.bootstrap, client_id="someone-else") as c:
        resp = get(c)
        assert resp.requested_metrics == ["*"] and resp.push_interval_ms == 1000
    # the software name and version a connection's ApiVersions (v3+) told are matched too
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
    subscribe(b.bootstrap, "by-software", metrics="org.apache.kafka.consumer.", interval_ms="2000",
              match="client_software_name=acme-client,client_software_version=1\\..*")
    with RawClient(b.bootstrap, client_id="unmatched") as c:
        assert c.request(ApiVersionsRequest(client_software_name="acme-client", client_software_version="1.2.3"), 3,
                         ApiVersionsResponse).error_code == 0
        resp = get(c)
        assert resp.requested_metrics == ["org.apache.kafka.consumer."] and resp.push_interval_ms == 2000


def test_subscriptions_survive_restart(broker_factory):
    b, port = metrics_broker(broker_factory)
    subscribe(b.bootstrap, "durable", metrics="org.apache.kafka.", interval_ms="5000")
    b.restart()
    with RawClient(b.bootstrap, client_id="after-restart") as c:
        resp = get(c)
        assert resp.requested_metrics == ["org.apache.kafka."] and resp.push_interval_ms == 5000


def test_java_client_pushes_its_metrics(telemetry_broker):
    b, port = telemetry_broker
    subscribe(b.bootstrap, "java-producers", metrics="org.apache.kafka.producer.", interval_ms="500",
              match="client_id=java-telemetry,client_software_name=apache-kafka-java")
    lab.fetch()
    topic = f"telemetry-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run([lab.java_bin(), "-Xmx256m", "-cp", str(lab.libs_dir() / "*"),
                           str(ROOT / "tests" / "java" / "TelemetryCheck.java"), b.bootstrap, topic, "java-telemetry",
                           "4"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    instance = proc.stdout.strip().splitlines()[-1].split("=", 1)[1]
    samples = scrape(port)
    mine = {name for name, labels in samples if dict(labels).get("client_instance_id") == instance}
    assert any(n.startswith("minikafka_client_org_apache_kafka_producer_") for n in mine), sorted(
        n for n, _ in samples if n.startswith("minikafka_client"))[:50]
    assert all(dict(labels).get("client_id") == "java-telemetry" for name, labels in samples
               if dict(labels).get("client_instance_id") == instance)
    assert samples[("minikafka_client_telemetry_pushes_total", frozenset())] >= 1


def test_librdkafka_pushes_its_metrics(telemetry_broker):
    from confluent_kafka import Producer
    b, port = telemetry_broker
    subscribe(b.bootstrap, "rdkafka", metrics="*", interval_ms="500", match="client_id=rdkafka-telemetry")
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "rdkafka-telemetry", "enable.metrics.push": True})
    try:
        deadline = time.monotonic() + 30
        while True:
            p.produce("rdkafka-telemetry-topic", b"v")
            p.poll(0.2)
            samples = scrape(port)
            names = {n for n, labels in samples if dict(labels).get("client_id") == "rdkafka-telemetry"}
            if any(n.startswith("minikafka_client_org_apache_kafka_producer_") for n in names):
                break
            assert time.monotonic() < deadline, sorted(n for n, _ in samples if n.startswith("minikafka_client"))
    finally:
        p.flush(10)


def test_reconnecting_client_starts_afresh(telemetry_broker):
    """Kafka's disconnect listener: the instance goes with its connection, so the same id asking again on a
    new connection is answered at once (not throttled)."""
    b, _port = telemetry_broker
    subscribe(b.bootstrap, "slow", metrics="org.apache.kafka.", interval_ms="60000")
    with RawClient(b.bootstrap, client_id="reconnects") as c:
        first = get(c)
        assert first.error_code == 0
        assert get(c, first.client_instance_id).error_code == THROTTLED
    deadline = time.monotonic() + 10
    while True:
        with RawClient(b.bootstrap, client_id="reconnects") as c:
            again = get(c, first.client_instance_id)
        if again.error_code == 0 or time.monotonic() > deadline:  # the close is seen asynchronously
            break
        time.sleep(0.2)
    assert again.error_code == 0 and again.requested_metrics == ["org.apache.kafka."]
