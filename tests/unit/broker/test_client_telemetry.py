"""The pure parts of client telemetry (KIP-714): subscription validation and matching
(broker/config/client_metrics_configs.py), Kafka's ClientMetricsManager rules with a fake clock, the
OTLP decoding of every accepted codec, and the bounds of the series kept for /metrics
(broker/ops/client_telemetry.py)."""
from __future__ import annotations

import asyncio
import uuid

import kafka.codec as codec
import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (Gauge, Histogram, HistogramDataPoint, Metric, MetricsData,
                                                        NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum)

from minikafka.broker.config import client_metrics_configs as cmc
from minikafka.broker.config.dynamic import ConfigRequestError
from minikafka.broker.ops import client_telemetry as ct


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(tmp_path, **subs: dict[str, str]) -> cmc.ClientMetricsConfigStore:
    s = cmc.ClientMetricsConfigStore(object(), tmp_path)
    for name, props in subs.items():
        s.replace(name, props)
    return s


def test_kafka_uuid_text_and_hash():
    assert ct.kafka_uuid_text(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    # Uuid(1, 2).hashCode(): h = 1 ^ 2; (int)(h >> 32) ^ (int) h
    assert ct.java_uuid_hash(uuid.UUID(int=(1 << 64) | 2)) == 3
    assert ct.java_uuid_hash(uuid.UUID(int=(0xFFFFFFFF << 64))) == -1


def test_subscription_id_depends_on_metrics_interval_and_instance():
    a, b = uuid.uuid4(), uuid.uuid4()
    one = ct.subscription_id(["x.", "y."], 1000, a)
    assert one == ct.subscription_id(["y.", "x."], 1000, a)  # a set: order does not matter
    assert one != ct.subscription_id(["x."], 1000, a)
    assert one != ct.subscription_id(["x.", "y."], 2000, a)
    assert one != ct.subscription_id(["x.", "y."], 1000, b)
    assert -2**31 <= one < 2**31


def test_new_instance_ids_avoid_reserved_and_leading_dash():
    for _ in range(500):
        u = ct.new_instance_id(lambda _u: False)
        assert u not in ct.RESERVED_IDS and not ct.kafka_uuid_text(u).startswith("-")


@pytest.mark.parametrize("props,code,message", [
    ({"nope": "1"}, 42, "Unknown client metrics configuration: nope"),
    ({"interval.ms": "99"}, 42, "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ({"interval.ms": "x"}, 40, "Invalid value x for configuration interval.ms: Not a number of type INT"),
    ({"interval.ms": "99999999999"}, 40, None),
    ({"match": "client_id"}, 40, "Illegal client matching pattern: client_id"),
    ({"match": "client_id=a=b"}, 40, None),
    ({"match": "host=a"}, 40, None),
    ({"match": "client_id=("}, 40, None),
])
def test_validation_as_kafka(props, code, message):
    with pytest.raises(ConfigRequestError) as info:
        cmc.validate("s", props)
    assert info.value.code == code
    if message:
        assert str(info.value) == message
    cmc.validate("s", {"metrics": "", "interval.ms": "100", "match": "client_id=a.*, client_software_name=java"})


def test_matching_is_full_and_on_every_pattern():
    sub = cmc.Subscription("s", {"match": "client_id=app-.*,client_software_name=apache-kafka-java"})
    assert sub.matches({"client_id": "app-1", "client_software_name": "apache-kafka-java"})
    assert not sub.matches({"client_id": "my-app-1", "client_software_name": "apache-kafka-java"})
    assert not sub.matches({"client_id": "app-1", "client_software_name": None})
    assert cmc.Subscription("all", {}).matches({})


def test_store_persists_and_drops_emptied_subscriptions(tmp_path):
    s = store(tmp_path, a={"metrics": "x.", "interval.ms": "1000"})
    again = cmc.ClientMetricsConfigStore(object(), tmp_path)
    again.load()
    assert again.subscriptions == {"a": {"metrics": "x.", "interval.ms": "1000"}}
    s.replace("a", {})
    again.load()
    assert "a" not in s.subscriptions
    assert s.describe("nothing") == [("interval.ms", "300000", 5, 3, []), ("match", "", 5, 7, []),
                                     ("metrics", "", 5, 7, [])]
    with pytest.raises(ConfigRequestError):
        s.incremental("a", [("metrics", 2, "y.")])  # APPEND: refused as Kafka 4.3's controller does


def test_manager_union_star_interval_and_reevaluation(tmp_path):
    s = store(tmp_path, a={"metrics": "x.,y.", "interval.ms": "5000"}, b={"metrics": "z.", "interval.ms": "2000"},
              other={"metrics": "*", "match": "client_id=someone"})
    clock = Clock()
    m = ct.ClientTelemetry(s, clock=clock)
    code, inst = m.get_subscriptions(None, "me", "127.0.0.1:5000")
    assert code == 0 and inst.metrics == ["x.", "y.", "z."] and inst.interval_ms == 2000
    assert inst.attributes["client_source_port"] == "5000"
    code, star = m.get_subscriptions(None, "someone", "127.0.0.1:5001")
    assert star.metrics == ["*"] and star.interval_ms == 2000
    # a subscription change: the next request re-evaluates (and is not throttled: a new instance)
    s.replace("b", {})
    code, again = m.get_subscriptions(inst.id, "me", "127.0.0.1:5000")
    assert code == 0 and again.metrics == ["x.", "y."] and again.interval_ms == 5000
    assert again.subscription_id != inst.subscription_id


def test_manager_throttling_terminating_and_errors(tmp_path):
    s = store(tmp_path, a={"metrics": "x.", "interval.ms": "1000"})
    clock = Clock()
    m = ct.ClientTelemetry(s, max_bytes=100, clock=clock)
    code, inst = m.get_subscriptions(uuid.UUID(int=0), "c", "h:1")
    assert m.get_subscriptions(inst.id, "c", "h:1")[0] == ct.THROTTLED
    sid = inst.subscription_id

    def push(**kw):
        args = dict(subscription=sid, terminating=False, compression=0, size=10) | kw
        return m.check_push(inst.id, "c", "h:1", args["subscription"], args["terminating"], args["compression"],
                            args["size"])[0]
    assert push() == 0  # right after the Get
    clock.now += 0.5
    assert push() == ct.THROTTLED
    clock.now += 0.6
    assert push(subscription=sid + 1) == ct.UNKNOWN_SUBSCRIPTION_ID
    clock.now += 1.1
    assert push(compression=7) == ct.UNSUPPORTED_COMPRESSION_TYPE
    clock.now += 1.1
    assert push(size=101) == ct.TELEMETRY_TOO_LARGE
    clock.now += 0.1
    assert push(terminating=True) == 0  # taken though early
    clock.now += 5
    assert push() == ct.INVALID_REQUEST
    assert m.check_push(uuid.UUID(int=1), "c", "h:1", 0, False, 0, 0)[0] == ct.INVALID_REQUEST
    assert m.check_push(None, "c", "h:1", 0, False, 0, 0)[0] == ct.INVALID_REQUEST


def payload() -> bytes:
    attrs = [KeyValue(key="topic", value=AnyValue(string_value="t")), KeyValue(key="ok", value=AnyValue(bool_value=True))]
    return MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[
        Metric(name="a.gauge", gauge=Gauge(data_points=[NumberDataPoint(as_double=1.5, attributes=attrs)])),
        Metric(name="a.count", sum=Sum(is_monotonic=True, aggregation_temporality=1,
                                       data_points=[NumberDataPoint(as_int=2)])),
        Metric(name="a.total", sum=Sum(is_monotonic=True, aggregation_temporality=2,
                                       data_points=[NumberDataPoint(as_int=7)])),
        Metric(name="a.updown", sum=Sum(is_monotonic=False, data_points=[NumberDataPoint(as_int=-3)])),
        Metric(name="a.hist", histogram=Histogram(data_points=[HistogramDataPoint(count=4, sum=10.0)])),
    ])])]).SerializeToString()


@pytest.mark.parametrize("compression,encode", [(0, lambda b: b), (1, codec.gzip_encode), (2, codec.snappy_encode),
                                                (3, codec.lz4_encode), (4, codec.zstd_encode)])
def test_decode_every_codec(compression, encode):
    points = ct.decode_metrics(encode(payload()), compression, 1 << 20)
    assert points == [("a.gauge", "gauge", {"topic": "t", "ok": "true"}, 1.5), ("a.count", "counter", {}, 2.0),
                      ("a.total", "counter_cumulative", {}, 7.0), ("a.updown", "gauge", {}, -3.0),
                      ("a.hist.count", "counter", {}, 4.0), ("a.hist.sum", "counter", {}, 10.0)]


def test_decode_refuses_garbage_and_bombs():
    with pytest.raises(Exception):
        ct.decode_metrics(b"\xff\xff\xff", 0, 1 << 20)
    with pytest.raises(Exception):
        ct.decode_metrics(codec.gzip_encode(b"\0" * 100_000), 1, 1000)  # inflates past the cap


def test_series_accumulate_are_capped_and_expire(tmp_path, monkeypatch):
    s = store(tmp_path, a={"metrics": "*", "interval.ms": "1000"})
    clock = Clock()
    m = ct.ClientTelemetry(s, clock=clock)
    _, inst = m.get_subscriptions(None, "c", "h:1")
    for _ in range(2):
        assert asyncio.run(m.export(inst, "c", 0, payload())) == 0
    ((key, client),) = m.snapshot()
    assert key == ct.kafka_uuid_text(inst.id)
    assert client.series[("a.count", "counter", ())] == 4.0  # deltas added up
    assert client.series[("a.total", "counter", ())] == 7.0  # cumulative taken as is
    assert client.series[("a.gauge", "gauge", (("ok", "true"), ("topic", "t")))] == 1.5
    assert asyncio.run(m.export(inst, "c", 0, b"\x01garbage")) == ct.INVALID_RECORD
    fams = {f.name: f for f in ct.metric_families(m)}
    assert "minikafka_client_a_gauge" in fams and "minikafka_client_a_count" in fams
    (sample,) = fams["minikafka_client_a_gauge"].samples
    assert sample.labels == {"client_instance_id": key, "client_id": "c", "ok": "true", "topic": "t"}
    # the per-client cap
    monkeypatch.setattr(ct, "MAX_SERIES_PER_CLIENT", 3)
    _, other = m.get_subscriptions(None, "d", "h:2")
    asyncio.run(m.export(other, "d", 0, payload()))
    assert len(dict(m.snapshot())[ct.kafka_uuid_text(other.id)].series) == 3
    # the cap over every client
    monkeypatch.setattr(ct, "MAX_SERIES", m.series_count + 1)
    _, third = m.get_subscriptions(None, "e", "h:3")
    asyncio.run(m.export(third, "e", 0, payload()))
    assert len(dict(m.snapshot())[ct.kafka_uuid_text(third.id)].series) == 1
    # silent for 3 intervals: gone
    clock.now += 3.5
    assert m.snapshot() == [] and m.series_count == 0


def test_prometheus_names():
    assert ct.prometheus_name("org.apache.kafka.producer.record-send-rate") == "org_apache_kafka_producer_record_send_rate"
    assert ct.prometheus_name("1x") == "_1x"


def test_a_closed_connection_forgets_its_instance(tmp_path):
    s = store(tmp_path, a={"metrics": "x.", "interval.ms": "60000"})
    m = ct.ClientTelemetry(s, clock=Clock())
    _, inst = m.get_subscriptions(None, "c", "10.0.0.1:4000")
    assert m.get_subscriptions(inst.id, "c", "10.0.0.1:4000")[0] == ct.THROTTLED
    m.connection_closed("10.0.0.2:4000")  # another connection: nothing changes
    assert m.get_subscriptions(inst.id, "c", "10.0.0.1:4000")[0] == ct.THROTTLED
    m.connection_closed("10.0.0.1:4000")  # as Kafka's disconnect listener: the client starts afresh
    code, again = m.get_subscriptions(inst.id, "c", "10.0.0.3:5000")
    assert code == 0 and again.id == inst.id and again.attributes["client_source_address"] == "10.0.0.3"
    assert m.by_connection == {"10.0.0.3:5000": inst.id}
