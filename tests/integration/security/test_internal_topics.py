"""Internal topics are their coordinators' alone, as in Kafka: Produce to `__consumer_offsets` /
`__transaction_state` is INVALID_TOPIC_EXCEPTION (17) for any client (only the client id Kafka's own tools
use, `__admin_client`, may append), DeleteRecords on them is 17, AddPartitionsToTxn v0-3 refuses them with
TOPIC_AUTHORIZATION_FAILED even without an authorizer; their offsets do not move. No authorizer here: the
refusals do not depend on one."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.support.helpers import RawClient, build_batch, list_offset, metadata_raw, produce_raw, wait_until
from tests.support.txn_helpers import add_partitions, end_txn, find_txn_coordinator, init_producer_id

INTERNAL = ["__consumer_offsets", "__transaction_state"]
INVALID_TOPIC, TOPIC_DENIED, NOT_ATTEMPTED = 17, 29, 55


@pytest.fixture(scope="module")
def internal_ready(shared_broker):
    """Both internal topics exist (created by the coordinators' first lookups)."""
    with RawClient(shared_broker.bootstrap) as c:
        c.request(FindCoordinatorRequest(key="internal-warm-up", key_type=0), 3)
        find_txn_coordinator(c, "internal-warm-up")
        wait_until(lambda: all(t.error_code == 0 and t.partitions for t in metadata_raw(c, INTERNAL).topics),
                   timeout=30, what="the internal topics")
    return shared_broker


def offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    return list_offset(bootstrap, topic, 0, -2), list_offset(bootstrap, topic, 0, -1)


@pytest.mark.parametrize("topic", INTERNAL)
def test_produce_to_an_internal_topic_is_refused(internal_ready, topic):
    b = internal_ready.bootstrap
    before = offsets(b, topic)
    with RawClient(b, client_id="not-an-admin") as c:
        resp = produce_raw(c, topic, build_batch([b"forged"]))
    assert resp.error_code == INVALID_TOPIC, resp
    assert resp.error_message is None  # as Kafka answers (its exception's message stays in its log)
    assert offsets(b, topic) == before


@pytest.mark.parametrize("topic", INTERNAL)
def test_delete_records_on_an_internal_topic_is_refused(internal_ready, topic):
    b = internal_ready.bootstrap
    before = offsets(b, topic)
    T = DeleteRecordsRequest.DeleteRecordsTopic
    with RawClient(b) as c:
        resp = c.request(DeleteRecordsRequest(topics=[T(name=topic, partitions=[T.DeleteRecordsPartition(
            partition_index=0, offset=-1)])], timeout_ms=10000), 2)
    (p,) = resp.topics[0].partitions
    assert (p.error_code, p.low_watermark) == (INVALID_TOPIC, -1)
    assert offsets(b, topic) == before


def test_add_partitions_to_txn_refuses_internal_topics_without_an_authorizer(internal_ready):
    b = internal_ready.bootstrap
    topic = f"internal-peer-{uuid.uuid4().hex[:8]}"
    with RawClient(b) as c:
        metadata_raw(c, [topic], auto_create=True)
        wait_until(lambda: metadata_raw(c, [topic]).topics[0].error_code == 0, what="the topic")
        tid = f"{topic}-tx"
        assert find_txn_coordinator(c, tid).error_code == 0
        r = init_producer_id(c, tid)
        got = add_partitions(c, tid, r.producer_id, r.producer_epoch, {"__consumer_offsets": [0], topic: [0]})
        assert got == {("__consumer_offsets", 0): TOPIC_DENIED, (topic, 0): NOT_ATTEMPTED}
        assert add_partitions(c, tid, r.producer_id, r.producer_epoch, {topic: [0]}) == {(topic, 0): 0}
        assert end_txn(c, tid, r.producer_id, r.producer_epoch, False) == 0


@pytest.mark.minikafka_only
def test_the_admin_client_id_may_append_as_in_kafka(broker):
    """Kafka lets the client id of its own admin tools append to an internal topic; so does minikafka (a fresh
    broker: what it appends is replayed by no other test)."""
    with RawClient(broker.bootstrap) as c:
        c.request(FindCoordinatorRequest(key="admin-id", key_type=0), 3)
        wait_until(lambda: metadata_raw(c, ["__consumer_offsets"]).topics[0].error_code == 0, what="offsets topic")
    with RawClient(broker.bootstrap, client_id="__admin_client") as c:
        assert produce_raw(c, "__consumer_offsets", build_batch([b"v"], keys=[b"k"])).error_code == 0
