"""The ProduceResponse fast path encodes byte-for-byte what kafka-python's encoder does."""
from __future__ import annotations

import random
import uuid

import pytest
from kafka.protocol.producer import ProduceResponse

from minikafka.protocol.produce_encoding import Appended, encode_produce_success

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse


def _generic(version: int, topics: list[tuple[object, list[Appended]]]) -> bytes:
    out = []
    for key, parts in topics:
        prs = [PartitionResponse(index=a.index, error_code=0, base_offset=a.base_offset,
                                 log_append_time_ms=a.log_append_time_ms, log_start_offset=a.log_start_offset,
                                 record_errors=[], error_message=None) for a in parts]
        out.append(TopicResponse(topic_id=key, partition_responses=prs) if version >= 13
                   else TopicResponse(name=key, partition_responses=prs))
    return ProduceResponse(responses=out, throttle_time_ms=0).encode(version=version)


@pytest.mark.parametrize("version", range(3, 14))
def test_matches_kafka_python_encoder(version: int) -> None:
    rng = random.Random(version)
    for _ in range(40):
        topics = []
        for _ in range(rng.randint(0, 3)):
            key = uuid.UUID(int=rng.getrandbits(128)) if version >= 13 else rng.choice(["t", "", "é" * 3, "x" * 300])
            parts = [Appended(rng.randint(0, 2**31 - 1), rng.choice([-1, 0, rng.randint(0, 2**63 - 1)]),
                              rng.choice([-1, rng.randint(0, 2**45)]), rng.choice([-1, 0, rng.randint(0, 2**40)]))
                     for _ in range(rng.randint(0, 40))]
            topics.append((key, parts))
        assert bytes(encode_produce_success(version, topics)) == _generic(version, topics)


def test_decodes_back() -> None:
    body = encode_produce_success(10, [("orders", [Appended(3, 100, -1, 0), Appended(0, 7, 1700000000000, 5)])])
    resp = ProduceResponse.decode(bytes(body), version=10)
    (topic,) = resp.responses
    assert topic.name == "orders"
    assert [(p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset)
            for p in topic.partition_responses] == [(3, 0, 100, -1, 0), (0, 0, 7, 1700000000000, 5)]
