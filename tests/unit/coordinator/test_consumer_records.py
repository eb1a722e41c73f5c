"""coordinator/group/consumer/records.py: every consumer-group record type encodes and decodes back, keys
carry the record type as their version, tombstones have no value; config/settings bounds."""
from __future__ import annotations

import uuid

import pytest

from minikafka.coordinator.group.consumer import records as rec
from minikafka.coordinator.group.consumer.config import ConsumerGroupSettings
from minikafka.coordinator.group.consumer.model import ConsumerMember, MemberState
from minikafka.coordinator.group.records import decode_key as decode_classic_key

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def roundtrip(record):
    key, value = record
    k = rec.decode_key(key)
    assert decode_classic_key(key) is None  # the classic loader skips these
    return k, (rec.decode_value(k.record_type, value) if value is not None else None)


def test_group_level_records():
    assert roundtrip(rec.group_metadata("g", 7)) == (rec.ConsumerRecordKey(3, "g"), 7)
    assert roundtrip(rec.target_metadata("g", 6)) == (rec.ConsumerRecordKey(6, "g"), 6)
    topics = {"a": (T1, 3), "b": (T2, 1)}
    assert roundtrip(rec.partition_metadata("g", topics)) == (rec.ConsumerRecordKey(4, "g"), topics)
    assert roundtrip(rec.group_metadata("g", None)) == (rec.ConsumerRecordKey(3, "g"), None)


def test_member_records():
    m = ConsumerMember("m", member_epoch=5, previous_member_epoch=4, state=MemberState.UNREVOKED_PARTITIONS,
                       instance_id="i", rack_id=None, client_id="c", client_host="/h",
                       subscribed_topic_names=("a", "b"), subscribed_topic_regex="x.*", server_assignor="range",
                       rebalance_timeout_ms=3000, assigned={T1: frozenset({0, 2})},
                       pending_revocation={T2: frozenset({1})})
    k, v = roundtrip(rec.member_metadata("g", m))
    assert k == rec.ConsumerRecordKey(5, "g", "m")
    assert (v.instance_id, v.rack_id, v.client_id, v.client_host, v.subscribed_topic_names, v.subscribed_topic_regex,
            v.rebalance_timeout_ms, v.server_assignor) == ("i", None, "c", "/h", ("a", "b"), "x.*", 3000, "range")
    k, v = roundtrip(rec.current_assignment("g", m))
    assert k == rec.ConsumerRecordKey(8, "g", "m")
    assert (v.member_epoch, v.previous_member_epoch, v.state, v.assigned, v.pending_revocation) == \
        (5, 4, MemberState.UNREVOKED_PARTITIONS, m.assigned, m.pending_revocation)
    k, v = roundtrip(rec.target_member("g", "m", {T1: frozenset({3})}))
    assert (k, v) == (rec.ConsumerRecordKey(7, "g", "m"), {T1: frozenset({3})})
    for record in (rec.member_metadata("g", "m"), rec.current_assignment("g", "m"), rec.target_member("g", "m", None)):
        assert record[1] is None and rec.decode_key(record[0]).member_id == "m"


def test_settings_bounds():
    props = {"group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
             "group.consumer.heartbeat.interval.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "1000",
             "group.consumer.assignors": "range,uniform"}
    s = ConsumerGroupSettings.from_props(lambda k: props.get(k, ""))
    assert (s.session_timeout_ms, s.heartbeat_interval_ms, s.assignors) == (6000, 1000, ("range", "uniform"))
    with pytest.raises(ValueError):
        ConsumerGroupSettings.from_props(lambda k: {"group.consumer.session.timeout.ms": "1000"}.get(k, ""))
    with pytest.raises(ValueError):
        ConsumerGroupSettings.from_props(lambda k: {"group.consumer.assignors": "sticky"}.get(k, ""))


def test_broker_refuses_bad_consumer_group_settings():
    from minikafka.broker.config.core import BrokerConfig, ConfigError

    with pytest.raises(ConfigError):
        BrokerConfig.load(overrides={"group.consumer.heartbeat.interval.ms": "100"}, environ={})
    BrokerConfig.load(overrides={"group.consumer.heartbeat.interval.ms": "6000"}, environ={})


def test_classic_member_metadata_tagged_field():
    from minikafka.coordinator.group.consumer.model import ClassicInfo

    m = ConsumerMember("m", subscribed_topic_names=("a",), classic=ClassicInfo(10000, (("range", b"\x00\x01x"),)))
    _, v = roundtrip(rec.member_metadata("g", m))
    assert v.classic == ClassicInfo(10000, (("range", b"\x00\x01x"),))
    _, v = roundtrip(rec.member_metadata("g", ConsumerMember("m")))
    assert v.classic is None
