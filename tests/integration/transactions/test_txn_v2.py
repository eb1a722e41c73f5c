"""Transaction version 2 (KIP-890 part 2) over the raw protocol: Produce v12 adds its partition to the
transaction, TxnOffsetCommit v5 its group's offsets partition; EndTxn v5 bumps the producer epoch and
returns it; a late Produce or EndTxn of an ended transaction is refused as Kafka refuses it; a change
of transaction.version with a transaction open (Kafka's `kafka-features` tool) lets it finish as
begun; a broker killed in the middle of ending a TV2 transaction completes it after restart."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from tests.support.helpers import RawClient, wait_until
from tests.integration.admin.test_features import TV, finalized, tv_restored  # noqa: F401 (fixture)
from tests.integration.clients.test_reference_lab import tool
from tests.support.txn_helpers import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    PRODUCER_FENCED,
    add_partitions,
    consume_to_end,
    create_topics,
    describe_transactions,
    end_txn,
    find_txn_coordinator,
    init_producer_id,
    produce_txn,
    txn_batch,
    txn_offset_commit,
)


OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def uid() -> str:
    return uuid.uuid4().hex[:8]


def end_txn_v5(c: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    for _ in range(100):
        r = c.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit),
                      5, EndTxnResponse)
        if r.error_code != CONCURRENT_TRANSACTIONS:
            break
        time.sleep(0.1)
    return r.error_code, r.producer_id, r.producer_epoch


def begin(c: RawClient, tid: str) -> tuple[int, int]:
    assert find_txn_coordinator(c, tid).error_code == 0
    r = init_producer_id(c, tid, 60000, version=5)
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def completed(c: RawClient, tid: str, state: str = "CompleteCommit"):
    """The transaction's description once it reached `state` (Kafka answers EndTxn once PrepareCommit
    is written; the markers follow)."""
    return wait_until(lambda: next((d for d in describe_transactions(c, [tid]) if d.transaction_state == state), None),
                      10, what=f"{tid} in {state}")


def values(bootstrap: str, topic: str, partitions: list[int]) -> list[bytes]:
    got = consume_to_end(bootstrap, topic, partitions)
    return sorted(v for part in got.values() for _o, v in part)


def test_tv2_epoch_bump_and_late_requests_of_an_ended_transaction(broker):
    b = broker.bootstrap
    topic, tid = f"tv2-{uid()}", f"tv2-{uid()}"
    create_topics(b, {topic: 2})
    with RawClient(b) as c:
        pid, e = begin(c, tid)
        # Produce v12: no AddPartitionsToTxn, the partition joins the transaction on the produce path
        assert produce_txn(c, tid, topic, 0, txn_batch(pid, e, 0, [b"a0", b"a1"]), version=12).error_code == 0
        (d,) = describe_transactions(c, [tid])
        assert d.transaction_state == "Ongoing" and d.producer_epoch == e
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0])]
        # a TV2 producer starts every partition at sequence 0
        assert produce_txn(c, tid, topic, 1, txn_batch(pid, e, 3, [b"gap"]), version=12).error_code \
            == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert end_txn_v5(c, tid, pid, e, True) == (0, pid, e + 1)
        # Kafka answers once PrepareCommit is written; the markers follow
        assert completed(c, tid).producer_epoch == e + 1
        # late produce of the ended transaction, into its partition and into another one
        assert produce_txn(c, tid, topic, 0, txn_batch(pid, e, 2, [b"late0"]), version=12).error_code \
            == INVALID_PRODUCER_EPOCH
        assert produce_txn(c, tid, topic, 1, txn_batch(pid, e, 0, [b"late1"]), version=12).error_code \
            == INVALID_PRODUCER_EPOCH
        # a retried EndTxn of the ended transaction gets the same answer; the other outcome is refused
        assert end_txn_v5(c, tid, pid, e, True) == (0, pid, e + 1)
        assert end_txn_v5(c, tid, pid, e, False)[0] == INVALID_TXN_STATE
        # the next transaction runs at the bumped epoch; a late EndTxn of the previous one is fenced
        assert produce_txn(c, tid, topic, 1, txn_batch(pid, e + 1, 0, [b"b0"]), version=12).error_code == 0
        assert end_txn_v5(c, tid, pid, e, True)[0] == PRODUCER_FENCED
        assert end_txn_v5(c, tid, pid, e + 1, False) == (0, pid, e + 2)
        # an abort with nothing in the transaction still moves the epoch on; a commit of nothing is refused
        assert end_txn_v5(c, tid, pid, e + 2, True)[0] == INVALID_TXN_STATE
        assert end_txn_v5(c, tid, pid, e + 2, False) == (0, pid, e + 3)
    assert values(b, topic, [0, 1]) == [b"a0", b"a1"]


def find_group_coordinator(c: RawClient, group: str) -> None:
    for _ in range(100):
        r = c.request(FindCoordinatorRequest(key=group, key_type=0), 3, FindCoordinatorResponse)
        if r.error_code == 0:
            return
        time.sleep(0.1)
    raise AssertionError(r)


def test_txn_offset_commit_v5_adds_the_offsets_partition(broker):
    from confluent_kafka import Consumer, TopicPartition
    b = broker.bootstrap
    src, out, tid, group = f"tv2-src-{uid()}", f"tv2-out-{uid()}", f"tv2-{uid()}", f"tv2-g-{uid()}"
    create_topics(b, {src: 1, out: 1})
    with RawClient(b) as c:
        find_group_coordinator(c, group)
        pid, e = begin(c, tid)
        assert produce_txn(c, tid, out, 0, txn_batch(pid, e, 0, [b"o"]), version=12).error_code == 0
        assert txn_offset_commit(c, tid, group, pid, e, {(src, 0): 7}, version=5) == {(src, 0): 0}
        (d,) = describe_transactions(c, [tid])
        assert "__consumer_offsets" in {t.topic for t in d.topics}
        # a late offset commit of the ended transaction is fenced (once its marker is written: until then
        # Kafka's offsets partition still sees the transaction open and skips the check)
        assert end_txn_v5(c, tid, pid, e, True) == (0, pid, e + 1)
        completed(c, tid)
        assert txn_offset_commit(c, tid, group, pid, e, {(src, 0): 9}, version=5) == {(src, 0): INVALID_PRODUCER_EPOCH}
    consumer = Consumer({"bootstrap.servers": b, "group.id": group})
    try:
        (tp,) = consumer.committed([TopicPartition(src, 0)], timeout=20)
        assert tp.offset == 7
    finally:
        consumer.close()


def test_feature_change_with_a_transaction_open(tv_restored):
    """A TV2 transaction open while transaction.version goes down to 1 ends as begun (EndTxn v5, epoch
    bump); TV1 transactions then run as before; the level goes back up to 2 with a TV1 one open."""
    b = tv_restored.bootstrap
    topic, tid, tid1 = f"tvswitch-{uid()}", f"tvswitch-{uid()}", f"tvswitch1-{uid()}"
    create_topics(b, {topic: 1})
    with RawClient(b) as c:
        pid, e = begin(c, tid)
        assert produce_txn(c, tid, topic, 0, txn_batch(pid, e, 0, [b"v2-open"]), version=12).error_code == 0
        res, out = tool("kafka-features", "--bootstrap-server", b, "downgrade", "--feature", f"{TV}=1")
        assert f"{TV} was downgraded to 1." in res.stdout, out
        assert finalized(b)[0][TV] == 1
        assert end_txn_v5(c, tid, pid, e, True) == (0, pid, e + 1)
        # a TV1 client: AddPartitionsToTxn, Produce v11, EndTxn v4 keep the epoch
        pid1, e1 = begin(c, tid1)
        assert add_partitions(c, tid1, pid1, e1, {topic: [0]}) == {(topic, 0): 0}
        assert produce_txn(c, tid1, topic, 0, txn_batch(pid1, e1, 0, [b"v1-open"]), version=11).error_code == 0
        res, out = tool("kafka-features", "--bootstrap-server", b, "upgrade", "--feature", f"{TV}=2")
        assert f"{TV} was upgraded to 2." in res.stdout, out
        assert end_txn(c, tid1, pid1, e1, True, version=4) == 0
        assert completed(c, tid1).producer_epoch == e1
    assert values(b, topic, [0]) == [b"v1-open", b"v2-open"]


@pytest.mark.minikafka_only
@pytest.mark.parametrize("crash_point, commit", [("after_prepare_commit", True), ("after_first_marker", True),
                                                 ("after_prepare_abort", False)])
def test_broker_killed_while_ending_a_tv2_transaction(broker_factory, crash_point, commit):
    """kill -9 (the test crash point exits 137) after PrepareCommit/PrepareAbort was written / after one
    marker: the restarted coordinator completes the transaction with the bumped epoch; the producer goes
    on with it."""
    b = broker_factory({"minikafka.test.crash.point": crash_point})
    topic, tid = f"tvcrash-{uid()}", f"tvcrash-{uid()}"
    create_topics(b.bootstrap, {topic: 2})
    with RawClient(b.bootstrap) as c:
        pid, e = begin(c, tid)
        for p in (0, 1):
            assert produce_txn(c, tid, topic, p, txn_batch(pid, e, 0, [f"x{p}".encode()]), version=12).error_code == 0
        c.send(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=e, committed=commit), 5)
        b.proc.wait(20)
    assert b.proc.returncode == 137
    b.kill()
    b.overrides.pop("minikafka.test.crash.point")
    b.start()
    with RawClient(b.bootstrap) as c:
        find_txn_coordinator(c, tid)
        state = "CompleteCommit" if commit else "CompleteAbort"
        wait_until(lambda: describe_transactions(c, [tid])[0].transaction_state == state, 20,
                   what="the prepared transaction completes after restart")
        assert describe_transactions(c, [tid])[0].producer_epoch == e + 1
        assert end_txn_v5(c, tid, pid, e, commit) == (0, pid, e + 1)  # the client's retry
        assert produce_txn(c, tid, topic, 0, txn_batch(pid, e, 1, [b"late"]), version=12).error_code \
            == INVALID_PRODUCER_EPOCH
        assert produce_txn(c, tid, topic, 0, txn_batch(pid, e + 1, 0, [b"y0"]), version=12).error_code == 0
        assert end_txn_v5(c, tid, pid, e + 1, True) == (0, pid, e + 2)
    assert values(b.bootstrap, topic, [0, 1]) == ([b"x0", b"x1"] if commit else []) + [b"y0"]


def test_confluent_kafka_runs_tv1_transactions_on_a_tv2_broker(broker):
    """librdkafka (confluent-kafka 2.16) has no KIP-890 part 2: with transaction.version 2 finalized it
    still adds partitions with AddPartitionsToTxn and ends with an EndTxn below v5, whose epoch stays;
    its commits and aborts work as before."""
    import logging
    import re

    from tests.support.txn_helpers import txn_producer

    b = broker.bootstrap
    topic, tid = f"rdk-{uid()}", f"rdk-{uid()}"
    create_topics(b, {topic: 2})
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"rdkafka-{tid}")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    p = txn_producer(b, tid, debug="protocol", logger=logger)
    for outcome, value in (("commit", b"c1"), ("abort", b"a1"), ("commit", b"c2")):
        p.begin_transaction()
        for part in (0, 1):
            p.produce(topic, value=value, partition=part)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)
    p.flush(10)
    p.poll(0)
    log = "\n".join(lines)
    end_versions = {int(v) for v in re.findall(r"Sent EndTxnRequest \(v(\d+)", log)}
    assert end_versions and max(end_versions) < 5, end_versions
    assert "Sent AddPartitionsToTxnRequest" in log
    assert values(b, topic, [0, 1]) == [b"c1", b"c1", b"c2", b"c2"]
    with RawClient(b) as c:
        (d,) = describe_transactions(c, [tid])
    assert d.transaction_state == "CompleteCommit"


def test_write_txn_markers_v2_tv2_marker_needs_a_newer_epoch(broker):
    """WriteTxnMarkers v2 (KIP-1228): a marker of a TV2 transaction must carry an epoch newer than the
    producer's data in the partition; the same epoch is refused while the transaction is open (a TV1
    marker with it is what ends a TV1 transaction)."""
    from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

    def markers(c: RawClient, pid: int, epoch: int, tv: int, topic: str) -> int:
        M = WriteTxnMarkersRequest.WritableTxnMarker
        req = WriteTxnMarkersRequest(markers=[M(producer_id=pid, producer_epoch=epoch, transaction_result=True,
                                                topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])],
                                                coordinator_epoch=0, transaction_version=tv)])
        resp = c.request(req, 2, WriteTxnMarkersResponse)
        return resp.markers[0].topics[0].partitions[0].error_code

    b = broker.bootstrap
    topic, tid = f"wtm-{uid()}", f"wtm-{uid()}"
    create_topics(b, {topic: 1})
    with RawClient(b) as c:
        pid, e = begin(c, tid)
        assert add_partitions(c, tid, pid, e, {topic: [0]}) == {(topic, 0): 0}
        assert produce_txn(c, tid, topic, 0, txn_batch(pid, e, 0, [b"m"]), version=11).error_code == 0
        assert markers(c, pid, e, 2, topic) == INVALID_PRODUCER_EPOCH
        assert values(b, topic, [0]) == []  # still open
        assert markers(c, pid, e + 1, 2, topic) == 0
        assert markers(c, pid, e + 1, 2, topic) == 0  # a retry of a written marker passes
        assert values(b, topic, [0]) == [b"m"]
        assert markers(c, pid, e, 0, topic) == INVALID_PRODUCER_EPOCH  # older than what the partition saw


@pytest.mark.minikafka_only  # reads minikafka's files
def test_dump_log_decodes_tv2_transaction_state(broker):
    """Kafka's DumpLogSegments reads the TV2 records of __transaction_state (ClientTransactionVersion,
    PreviousProducerId tagged fields) and the markers with the bumped epoch."""
    b = broker.bootstrap
    topic, tid = f"tvdump-{uid()}", f"tvdump-{uid()}"
    create_topics(b, {topic: 1})
    with RawClient(b) as c:
        pid, e = begin(c, tid)
        assert produce_txn(c, tid, topic, 0, txn_batch(pid, e, 0, [b"d"]), version=12).error_code == 0
        assert end_txn_v5(c, tid, pid, e, True) == (0, pid, e + 1)
    broker.stop()
    res, out = tool("kafka-dump-log", "--files", str(broker.data_dir / f"{topic}-0" / "00000000000000000000.log"))
    assert f"producerId: {pid} producerEpoch: {e + 1}" in res.stdout and "isControl: true" in res.stdout, out
    from minikafka.coordinator.partitioning import partition_for
    state_log = broker.data_dir / f"__transaction_state-{partition_for(tid, 50)}" / "00000000000000000000.log"
    res, out = tool("kafka-dump-log", "--files", str(state_log), "--transaction-log-decoder")
    assert f'"producerEpoch":{e + 1}' in res.stdout and '"clientTransactionVersion":2' in res.stdout, out
    assert '"transactionStatus":4' in res.stdout, out
