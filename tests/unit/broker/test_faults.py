"""The fault engine (broker/ops/faults.py): rule validation, matching, firing order, error responses."""
from __future__ import annotations

import pytest
from kafka.protocol.consumer import FetchRequest, OffsetCommitRequest
from kafka.protocol.producer import EndTxnRequest, ProduceRequest

from minikafka.broker.ops import faults
from minikafka.broker.ops.faults import ERROR_BUILDERS, FaultEngine, FaultRuleError


def produce(topic: str, partitions: list[int], acks: int = -1) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=p, records=b"") for p in partitions])])


@pytest.mark.parametrize("spec, message", [
    ({"api": "Nope", "error": "NOT_COORDINATOR"}, "unknown API 'Nope'"),
    ({"api": "Produce", "error": "NOT_AN_ERROR"}, "unknown Kafka error name"),
    ({"api": "Produce"}, "needs error, disconnect or delay_ms"),
    ({"api": "Produce", "disconnect": "sometimes"}, "disconnect must be one of"),
    ({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "disconnect": "after_apply"}, "not both"),
    ({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "times": 0}, "times must be >= 1"),
    ({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "times": "3"}, "times must be int"),
    ({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "partition": 1}, "partition needs topic"),
    ({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "colour": "red"}, "unknown rule field"),
    ({"api": "Metadata", "error": "NOT_COORDINATOR"}, "not supported for Metadata"),
    ([1, 2], "a rule is a JSON object"),
])
def test_bad_rules_refused(spec, message):
    with pytest.raises(FaultRuleError, match=message):
        FaultEngine().inject(spec)


def test_kafka_error_names():
    assert faults.ERROR_CODES["NOT_LEADER_OR_FOLLOWER"] == 6
    assert faults.ERROR_CODES["COORDINATOR_LOAD_IN_PROGRESS"] == 14
    assert faults.ERROR_CODES["INVALID_RECORD"] == 87
    assert faults.ERROR_CODES["TOPIC_AUTHORIZATION_FAILED"] == 29
    assert faults.ERROR_CODES["UNKNOWN_TOPIC_OR_PARTITION"] == 3


def test_matching_times_and_order():
    engine = FaultEngine()
    first = engine.inject({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "topic": "a", "partition": 1, "times": 2})
    second = engine.inject({"api": "Produce", "disconnect": "after_apply"})
    assert engine.take("Fetch", produce("a", [1])) is None
    assert engine.take("Produce", produce("a", [0])) is second  # partition 1 not in it
    assert engine.take("Produce", produce("a", [0, 1])) is first
    assert engine.take("Produce", produce("b", [1])) is None  # second is used up
    assert engine.take("Produce", produce("a", [1])) is first
    assert engine.take("Produce", produce("a", [1])) is None
    assert [f["rule"] for f in engine.fired] == [second.id, first.id, first.id]
    snap = engine.snapshot()
    assert [r["remaining"] for r in snap["rules"]] == [0, 0]
    engine.clear()
    assert engine.snapshot() == {"rules": [], "fired": []}


def test_transactional_and_group_filters():
    engine = FaultEngine()
    rule = engine.inject({"api": "EndTxn", "error": "COORDINATOR_LOAD_IN_PROGRESS", "transactional_id": "tx-1"})
    end = EndTxnRequest(transactional_id="tx-2", producer_id=1, producer_epoch=0, committed=True)
    assert engine.take("EndTxn", end) is None
    end.transactional_id = "tx-1"
    assert engine.take("EndTxn", end) is rule
    g = engine.inject({"api": "OffsetCommit", "error": "NOT_COORDINATOR", "group_id": "g1"})
    assert engine.take("OffsetCommit", OffsetCommitRequest(group_id="g2", topics=[])) is None
    assert engine.take("OffsetCommit", OffsetCommitRequest(group_id="g1", topics=[])) is g


def test_error_responses_encode_per_partition():
    resp = ERROR_BUILDERS["Produce"](produce("a", [0, 2]), 9, 6, None)
    assert [(p.index, p.error_code) for p in resp.responses[0].partition_responses] == [(0, 6), (2, 6)]
    resp.encode(version=9)
    T = FetchRequest.FetchTopic
    fetch = FetchRequest(topics=[T(topic="a", partitions=[T.FetchPartition(partition=3)])])
    resp = ERROR_BUILDERS["Fetch"](fetch, 11, 6, None)
    assert resp.responses[0].partitions[0].error_code == 6
    resp.encode(version=11)
    assert ERROR_BUILDERS["EndTxn"](None, 3, 14, None).error_code == 14
    for api in ERROR_BUILDERS:  # every builder's class loads
        assert callable(ERROR_BUILDERS[api])


def test_error_responses_encode_across_versions():
    import uuid

    from kafka.protocol.metadata import FindCoordinatorRequest
    T = FetchRequest.FetchTopic
    tid = uuid.uuid4()
    fetch = FetchRequest(topics=[T(topic_id=tid, partitions=[T.FetchPartition(partition=0)])])
    resp = ERROR_BUILDERS["Fetch"](fetch, 16, 6, None)
    assert resp.responses[0].topic_id == tid
    resp.encode(version=16)
    req = FindCoordinatorRequest(key="g", key_type=0, coordinator_keys=["g", "h"])
    assert [c.error_code for c in ERROR_BUILDERS["FindCoordinator"](req, 4, 14, None).coordinators] == [14, 14]
    ERROR_BUILDERS["FindCoordinator"](req, 4, 14, None).encode(version=4)
    assert ERROR_BUILDERS["FindCoordinator"](req, 3, 14, None).encode(version=3)
    assert ERROR_BUILDERS["InitProducerId"](None, 4, 14, None).producer_id == -1


def test_config_flag_validated(tmp_path):
    from minikafka.broker.config.core import BrokerConfig, ConfigError
    with pytest.raises(ConfigError, match="minikafka.faults.enable"):
        BrokerConfig.load(None, {"log.dirs": str(tmp_path), "minikafka.faults.enable": "yes"})
    assert faults.enabled(BrokerConfig.load(None, {"log.dirs": str(tmp_path), "minikafka.faults.enable": "true"}))
