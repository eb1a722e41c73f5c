"""Transaction APIs misused over the raw protocol: each case gets the error code Apache Kafka 4.3.1
returns (every expectation here was checked against it; these tests also run with --broker=kafka)."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from minikafka.coordinator.partitioning import partition_for
from tests.support.helpers import RawClient, wait_until
from tests.support.txn_helpers import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    PRODUCER_FENCED,
    TRANSACTION_ABORTABLE,
    TRANSACTION_COORDINATOR_FENCED,
    TRANSACTIONAL_ID_NOT_FOUND,
    UNKNOWN_TOPIC_OR_PARTITION,
    add_offsets,
    add_partitions,
    add_partitions_batched,
    create_topics,
    describe_transactions,
    end_txn,
    find_txn_coordinator,
    init_producer_id,
    list_transactions,
    produce_txn,
    txn_batch,
    txn_offset_commit,
    write_txn_markers,
)

OPERATION_NOT_ATTEMPTED = 55
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def uid() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def topic(shared_broker):
    name = f"txn-proto-{uid()}"
    create_topics(shared_broker.bootstrap, {name: 3})
    return name


@pytest.fixture
def client(shared_broker):
    with RawClient(shared_broker.bootstrap) as c:
        assert find_txn_coordinator(c, "any").error_code == 0
        yield c


def new_txn(client: RawClient, timeout_ms: int = 60000) -> tuple[str, int, int]:
    tid = f"proto-{uid()}"
    r = init_producer_id(client, tid, timeout_ms)
    assert r.error_code == 0, r
    return tid, r.producer_id, r.producer_epoch


def test_init_producer_id_validation(client):
    assert init_producer_id(client, f"t-{uid()}", 900001).error_code == INVALID_TRANSACTION_TIMEOUT
    assert init_producer_id(client, f"t-{uid()}", 0).error_code == INVALID_TRANSACTION_TIMEOUT
    assert init_producer_id(client, "", 1000).error_code == INVALID_REQUEST
    tid, pid, epoch = new_txn(client)
    assert epoch == 0
    again = init_producer_id(client, tid, 60000)  # a new instance: same producer id, next epoch
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, pid, 1)


def test_end_txn_without_add_partitions(client):
    tid, pid, epoch = new_txn(client)
    for version in (0, 3, 4):
        assert end_txn(client, tid, pid, epoch, True, version=version) == INVALID_TXN_STATE
    assert end_txn(client, tid, pid, epoch, False) == INVALID_TXN_STATE
    assert end_txn(client, tid, pid + 10_000, epoch, True) == INVALID_PRODUCER_ID_MAPPING
    assert end_txn(client, f"unknown-{uid()}", pid, epoch, True) == INVALID_PRODUCER_ID_MAPPING


def test_end_txn_is_idempotent_and_checks_the_outcome(client, topic):
    tid, pid, epoch = new_txn(client)
    assert add_partitions(client, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    assert produce_txn(client, tid, topic, 0, txn_batch(pid, epoch, 0, [b"x"])).error_code == 0
    assert end_txn(client, tid, pid, epoch, True) == 0
    assert end_txn(client, tid, pid, epoch, True, retry_concurrent=True) == 0  # a retried commit succeeds
    assert end_txn(client, tid, pid, epoch, False) == INVALID_TXN_STATE


def test_add_partitions_errors(client, topic):
    tid, pid, epoch = new_txn(client)
    missing = f"missing-{uid()}"
    assert add_partitions(client, tid, pid, epoch, {topic: [0], missing: [0]}) == {
        (topic, 0): OPERATION_NOT_ATTEMPTED, (missing, 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(client, tid, pid, epoch, {topic: [0, 7]}) == {
        (topic, 0): OPERATION_NOT_ATTEMPTED, (topic, 7): UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(client, tid, pid + 10_000, epoch, {topic: [0]}) == {(topic, 0): INVALID_PRODUCER_ID_MAPPING}


@pytest.mark.parametrize("version,expected", [(1, INVALID_PRODUCER_EPOCH), (3, PRODUCER_FENCED)])
def test_stale_epoch_after_fencing(client, topic, version, expected):
    """A second InitProducerId while a transaction is open aborts it with a bumped epoch
    (CONCURRENT_TRANSACTIONS first, then the epoch two above); the old epoch is fenced everywhere."""
    tid, pid, old = new_txn(client)
    assert add_partitions(client, tid, pid, old, {topic: [1]}) == {(topic, 1): 0}
    assert produce_txn(client, tid, topic, 1, txn_batch(pid, old, 0, [b"zombie"])).error_code == 0
    r = init_producer_id(client, tid, 60000, retry_concurrent=False)
    assert r.error_code == CONCURRENT_TRANSACTIONS
    r = init_producer_id(client, tid, 60000)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, old + 2)
    assert end_txn(client, tid, pid, old, True, version=version) == expected
    assert add_partitions(client, tid, pid, old, {topic: [1]}, version=version) == {(topic, 1): expected}
    assert produce_txn(client, tid, topic, 1, txn_batch(pid, old, 1, [b"z"])).error_code == INVALID_PRODUCER_EPOCH
    (desc,) = describe_transactions(client, [tid])
    assert (desc.transaction_state, desc.producer_epoch) == ("Empty", old + 2)


@pytest.mark.parametrize("version,expected", [(9, INVALID_TXN_STATE), (10, INVALID_TXN_STATE),
                                              (11, TRANSACTION_ABORTABLE)])
def test_produce_to_partition_not_in_transaction(client, topic, version, expected):
    """KIP-890 part 1: the broker checks with the coordinator before appending a transactional batch."""
    tid, pid, epoch = new_txn(client)
    assert add_partitions(client, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    p = produce_txn(client, tid, topic, 2, txn_batch(pid, epoch, 0, [b"stray"]), version=version)
    assert (p.error_code, p.base_offset, p.log_start_offset) == (expected, -1, -1)
    if expected == INVALID_TXN_STATE:
        assert p.error_message == "Partition was not added to the transaction"
    assert produce_txn(client, tid, topic, 0, txn_batch(pid, epoch, 0, [b"ok"]), version=version).error_code == 0
    assert end_txn(client, tid, pid, epoch, False) == 0


def test_produce_v12_adds_the_partition_implicitly(client, topic):
    tid, pid, epoch = new_txn(client)
    assert produce_txn(client, tid, topic, 2, txn_batch(pid, epoch, 0, [b"v12"]), version=12).error_code == 0
    (desc,) = describe_transactions(client, [tid])
    assert desc.transaction_state == "Ongoing"
    assert [(t.topic, list(t.partitions)) for t in desc.topics] == [(topic, [2])]
    assert end_txn(client, tid, pid, epoch, False) == 0


def test_produce_transactional_batch_checks_the_producer(client, topic):
    tid, pid, epoch = new_txn(client)
    assert add_partitions(client, tid, pid, epoch, {topic: [1]}) == {(topic, 1): 0}
    batch = txn_batch(pid, epoch, 0, [b"x"])
    assert produce_txn(client, None, topic, 1, batch).error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce_txn(client, f"unknown-{uid()}", topic, 1, batch).error_code == INVALID_PRODUCER_ID_MAPPING
    other = txn_batch(pid + 10_000, 0, 0, [b"x"])
    assert produce_txn(client, tid, topic, 1, other).error_code == INVALID_PRODUCER_ID_MAPPING
    assert produce_txn(client, tid, topic, 1, txn_batch(pid, epoch + 1, 0, [b"x"])).error_code == INVALID_PRODUCER_EPOCH
    assert end_txn(client, tid, pid, epoch, False) == 0


def test_verify_only_add_partitions(client, topic):
    """The broker form (v4+): verify_only answers per partition without adding."""
    tid, pid, epoch = new_txn(client)
    assert add_partitions(client, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    resp = add_partitions_batched(client, [(tid, pid, epoch, True, {topic: [0, 1]}),
                                           (f"unknown-{uid()}", pid, epoch, True, {topic: [0]}),
                                           (tid + "-other", pid, epoch, True, {topic: [0]})])
    assert resp.error_code == 0
    got = [sorted((p.partition_index, p.partition_error_code) for t in r.topic_results for p in t.results_by_partition)
           for r in resp.results_by_transaction]
    assert got == [[(0, 0), (1, TRANSACTION_ABORTABLE)], [(0, INVALID_PRODUCER_ID_MAPPING)],
                   [(0, INVALID_PRODUCER_ID_MAPPING)]]
    resp = add_partitions_batched(client, [(tid, pid, epoch + 1, True, {topic: [0]})])
    assert resp.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == PRODUCER_FENCED
    (desc,) = describe_transactions(client, [tid])
    assert [list(t.partitions) for t in desc.topics] == [[0]]  # verify_only added nothing
    assert end_txn(client, tid, pid, epoch, False) == 0


def _find_group_coordinator(client: RawClient, group: str) -> None:
    for _ in range(100):
        r = client.request(FindCoordinatorRequest(key=group, key_type=0), 3, FindCoordinatorResponse)
        if r.error_code == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"no group coordinator for {group}")


def _txn_offset_commit(client, *args, **kwargs):
    """TxnOffsetCommit, retried while the group coordinator is still loading (Kafka, first use)."""
    for _ in range(100):
        result = txn_offset_commit(client, *args, **kwargs)
        if set(result.values()) & {14, 15, 16}:
            time.sleep(0.2)
            continue
        return result
    return result


def test_txn_offset_commit_errors(client, topic):
    tid, pid, epoch = new_txn(client)
    group = f"g-{uid()}"
    _find_group_coordinator(client, group)
    tp = (topic, 0)
    assert _txn_offset_commit(client, tid, group, pid, epoch, {tp: 5}) == {tp: INVALID_TXN_STATE}  # no AddOffsets
    assert add_offsets(client, tid, pid, epoch, group) == 0
    assert _txn_offset_commit(client, tid, group, pid, epoch, {tp: 5}) == {tp: 0}
    assert _txn_offset_commit(client, tid, group, pid, epoch + 1, {tp: 5}) == {tp: INVALID_PRODUCER_EPOCH}
    assert _txn_offset_commit(client, tid, group, pid, epoch + 1, {tp: 5}, version=1) == {tp: INVALID_PRODUCER_EPOCH}
    assert _txn_offset_commit(client, tid, group, pid + 10_000, epoch, {tp: 5}) == {tp: INVALID_PRODUCER_ID_MAPPING}
    # a group whose __consumer_offsets partition (of 50) is not the one AddOffsetsToTxn added: Kafka checks
    # the partition, so a group sharing it would be accepted
    other = next(g for g in (f"other-{uid()}" for _ in range(100))
                 if partition_for(g, 50) != partition_for(group, 50))
    _find_group_coordinator(client, other)
    assert _txn_offset_commit(client, tid, other, pid, epoch, {tp: 5}) == {tp: INVALID_TXN_STATE}
    missing = (f"missing-{uid()}", 0)
    assert _txn_offset_commit(client, tid, group, pid, epoch, {missing: 5}) == {missing: UNKNOWN_TOPIC_OR_PARTITION}
    assert end_txn(client, tid, pid, epoch, True) == 0


def test_add_offsets_stale_epoch(client):
    tid, pid, epoch = new_txn(client)
    assert init_producer_id(client, tid, 60000).producer_epoch == epoch + 1
    assert add_offsets(client, tid, pid, epoch, "g", version=3) == PRODUCER_FENCED
    assert add_offsets(client, tid, pid, epoch, "g", version=1) == INVALID_PRODUCER_EPOCH


def test_write_txn_markers_fencing(client, topic):
    """A marker carrying an older coordinator epoch than the partition has seen for the producer is
    fenced; one with an older producer epoch is rejected; unknown partitions are reported."""
    tid, pid, epoch = new_txn(client)
    tp = {topic: [2]}
    assert write_txn_markers(client, pid, epoch + 1, True, 5, tp) == {(topic, 2): 0}
    assert write_txn_markers(client, pid, epoch + 1, True, 4, tp) == {(topic, 2): TRANSACTION_COORDINATOR_FENCED}
    assert write_txn_markers(client, pid, epoch, True, 6, tp) == {(topic, 2): INVALID_PRODUCER_EPOCH}
    missing = f"missing-{uid()}"
    assert write_txn_markers(client, pid, epoch + 1, False, 6, {topic: [9], missing: [0]}) == {
        (topic, 9): UNKNOWN_TOPIC_OR_PARTITION, (missing, 0): UNKNOWN_TOPIC_OR_PARTITION}


def test_describe_and_list(client, topic):
    tid, pid, epoch = new_txn(client, timeout_ms=45000)
    assert add_partitions(client, tid, pid, epoch, {topic: [0, 1]}) == {(topic, 0): 0, (topic, 1): 0}
    known, unknown = describe_transactions(client, [tid, f"unknown-{uid()}"])
    assert (known.error_code, known.transaction_state, known.producer_id, known.producer_epoch,
            known.transaction_timeout_ms) == (0, "Ongoing", pid, epoch, 45000)
    assert known.transaction_start_time_ms > 0
    assert [(t.topic, sorted(t.partitions)) for t in known.topics] == [(topic, [0, 1])]
    assert (unknown.error_code, unknown.transaction_state) == (TRANSACTIONAL_ID_NOT_FOUND, "")
    listed = list_transactions(client, states=["Ongoing", "NoSuchState"], pids=[pid])
    assert listed.error_code == 0 and listed.unknown_state_filters == ["NoSuchState"]
    assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states] == [
        (tid, pid, "Ongoing")]
    assert end_txn(client, tid, pid, epoch, True) == 0
    # Kafka answers EndTxn once PrepareCommit is written and completes after the markers
    wait_until(lambda: [t.transaction_state for t in list_transactions(
        client, states=["CompleteCommit"], pids=[pid]).transaction_states] == ["CompleteCommit"])
    assert list_transactions(client, states=["Ongoing"], pids=[pid]).transaction_states == []
