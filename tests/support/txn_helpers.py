"""Raw-protocol helpers for the transaction tests: the transactional APIs over a RawClient, and
transactional / control batch builders. Requests are kafka-python's `kafka.protocol` classes."""
from __future__ import annotations

import struct
import time

from kafka.protocol.admin.transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.record.memory_records import MemoryRecordsBuilder

from tests.support.helpers import RawClient

# Kafka error codes used by these tests (kafka.errors names in comments)
NONE = 0
INVALID_REQUEST = 42
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_NOT_FOUND = 105
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120
UNKNOWN_TOPIC_OR_PARTITION = 3


def find_txn_coordinator(client: RawClient, txn_id: str, version: int = 3, retries: int = 50):
    """FindCoordinator(TRANSACTION), retried while the coordinator is not yet available."""
    for _ in range(retries):
        resp = client.request(FindCoordinatorRequest(key=txn_id, key_type=1), version, FindCoordinatorResponse)
        if resp.error_code not in (15, 14):  # COORDINATOR_NOT_AVAILABLE, LOAD_IN_PROGRESS
            return resp
        time.sleep(0.2)
    return resp


def init_producer_id(client: RawClient, txn_id: str | None, timeout_ms: int = 60000, *, producer_id: int = -1,
                     producer_epoch: int = -1, version: int = 4, retry_concurrent: bool = True):
    """InitProducerId; retries COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS / CONCURRENT_TRANSACTIONS
    (unless retry_concurrent is False) like a client does. Returns the response."""
    for _ in range(100):
        resp = client.request(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                                    producer_id=producer_id, producer_epoch=producer_epoch),
                              version, InitProducerIdResponse)
        retriable = (15, 14, 16) + ((CONCURRENT_TRANSACTIONS,) if retry_concurrent else ())
        if resp.error_code not in retriable:
            return resp
        time.sleep(0.1)
    return resp


def add_partitions(client: RawClient, txn_id: str, pid: int, epoch: int, parts: dict[str, list[int]],
                   version: int = 3) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn (client form, v0-3); returns {(topic, partition): error}."""
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    req = AddPartitionsToTxnRequest(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                                    v3_and_below_producer_epoch=epoch,
                                    v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in parts.items()])
    resp = client.request(req, version, AddPartitionsToTxnResponse)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_partitions_batched(client: RawClient, txns: list[tuple[str, int, int, bool, dict[str, list[int]]]],
                           version: int = 4):
    """AddPartitionsToTxn broker form (v4+): [(txn_id, pid, epoch, verify_only, parts)]. Returns the response."""
    Tx = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    T = Tx.AddPartitionsToTxnTopic
    req = AddPartitionsToTxnRequest(transactions=[
        Tx(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify,
           topics=[T(name=t, partitions=ps) for t, ps in parts.items()])
        for tid, pid, epoch, verify, parts in txns])
    return client.request(req, version, AddPartitionsToTxnResponse)


def add_offsets(client: RawClient, txn_id: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
    resp = client.request(AddOffsetsToTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                                 group_id=group), version, AddOffsetsToTxnResponse)
    return resp.error_code


def end_txn(client: RawClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3,
            retry_concurrent: bool = False) -> int:
    for _ in range(100):
        resp = client.request(EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                            committed=commit), version, EndTxnResponse)
        if not (retry_concurrent and resp.error_code == CONCURRENT_TRANSACTIONS):
            return resp.error_code
        time.sleep(0.1)
    return resp.error_code


def txn_offset_commit(client: RawClient, txn_id: str, group: str, pid: int, epoch: int,
                      offsets: dict[tuple[str, int], int], *, generation: int = -1, member: str = "",
                      version: int = 3) -> dict[tuple[str, int], int]:
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=off, committed_leader_epoch=-1,
                                            committed_metadata=""))
    req = TxnOffsetCommitRequest(transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
                                 generation_id=generation, member_id=member, group_instance_id=None,
                                 topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
    resp = client.request(req, version, TxnOffsetCommitResponse)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def write_txn_markers(client: RawClient, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                      parts: dict[str, list[int]], version: int = 1) -> dict[tuple[str, int], int]:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    T = M.WritableTxnMarkerTopic
    req = WriteTxnMarkersRequest(markers=[M(producer_id=pid, producer_epoch=epoch, transaction_result=commit,
                                            topics=[T(name=t, partition_indexes=ps) for t, ps in parts.items()],
                                            coordinator_epoch=coordinator_epoch)])
    resp = client.request(req, version, WriteTxnMarkersResponse)
    return {(t.name, p.partition_index): p.error_code for m in resp.markers for t in m.topics for p in t.partitions}


def describe_transactions(client: RawClient, txn_ids: list[str]):
    return client.request(DescribeTransactionsRequest(transactional_ids=txn_ids), 0,
                          DescribeTransactionsResponse).transaction_states


def list_transactions(client: RawClient, states: list[str] | None = None, pids: list[int] | None = None,
                      duration_ms: int = -1, version: int = 1):
    return client.request(ListTransactionsRequest(state_filters=states or [], producer_id_filters=pids or [],
                                                  duration_filter=duration_ms), version, ListTransactionsResponse)


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes], *, transactional: bool = True,
              keys: list[bytes | None] | None = None) -> bytes:
    """A transactional (or idempotent) batch with base sequence `seq`."""
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30, transactional=transactional,
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    ts = int(time.time() * 1000)
    for i, v in enumerate(values):
        b.append(timestamp=ts, key=keys[i] if keys else None, value=v, headers=[])
    b.close()
    return bytes(b.buffer())


def produce_txn(client: RawClient, txn_id: str | None, topic: str, partition: int, records: bytes,
                version: int = 9):
    """Produce with a transactional id; returns the PartitionProduceResponse."""
    req = ProduceRequest(acks=-1, timeout_ms=5000, transactional_id=txn_id, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])])
    resp = client.request(req, version)
    return resp.responses[0].partition_responses[0]


def control_record_type(batch: bytes) -> tuple[int, int] | None:
    """(type, coordinator epoch) of a control batch's single record, else None."""
    attrs = struct.unpack_from(">h", batch, 21)[0]
    if not attrs & 0x20:
        return None
    from kafka.record.default_records import DefaultRecordBatch
    (rec,) = list(DefaultRecordBatch(batch))
    return struct.unpack(">hh", rec.key)[1], struct.unpack(">hi", rec.value)[1]


# --- stock-client helpers -------------------------------------------------------------------

def txn_producer(bootstrap: str, txn_id: str, **extra):
    """A confluent-kafka transactional producer, init_transactions() done."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(30)
    return p


def consume_to_end(bootstrap: str, topic: str, partitions: list[int], *, isolation: str = "read_committed",
                   start: dict[int, int] | None = None, timeout: float = 30.0) -> dict[int, list[tuple[int, bytes]]]:
    """Everything a consumer with `isolation` sees from `start` (default: beginning) until it reports the
    end of every partition (for read_committed the end is the last stable offset):
    partition -> [(offset, value)]."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-tests-unused", "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True, "fetch.wait.max.ms": 50,
                  "auto.offset.reset": "earliest"})
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
    try:
        c.assign([TopicPartition(topic, p, (start or {}).get(p, OFFSET_BEGINNING)) for p in partitions])
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(partitions):
            if time.monotonic() > deadline:
                raise AssertionError(f"no end of partitions {set(partitions) - eof} within {timeout}s; got {got}")
            for m in c.consume(num_messages=1000, timeout=0.2):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise AssertionError(f"consume error: {m.error()}")
                eof.discard(m.partition())
                got[m.partition()].append((m.offset(), m.value()))
    finally:
        c.close()
    return got


def list_offset_isolated(client: RawClient, topic: str, partition: int, isolation: int,
                         timestamp: int = -1) -> int:
    """ListOffsets latest (or `timestamp`) with isolation_level 0/1; returns the offset."""
    from kafka.protocol.consumer import ListOffsetsRequest

    req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
    (p,) = client.request(req, 7).topics[0].partitions
    assert p.error_code == 0, p
    return p.offset


def fetch_isolated(client: RawClient, topic: str, partition: int, offset: int, isolation: int = 1,
                   max_bytes: int = 1 << 20):
    """One Fetch (v11) with the isolation level; returns the PartitionData."""
    from kafka.protocol.consumer import FetchRequest

    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=isolation,
                       session_id=0, session_epoch=-1, topics=[
                           FetchRequest.FetchTopic(topic=topic, partitions=[
                               FetchRequest.FetchTopic.FetchPartition(
                                   partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                   log_start_offset=-1, partition_max_bytes=max_bytes)])],
                       forgotten_topics_data=[], rack_id="")
    resp = client.request(req, 11)
    (p,) = resp.responses[0].partitions
    return p


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create topics (name -> partitions) and wait until every partition has a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.helpers import wait_topic_ready

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    for f in futures.values():
        f.result(timeout=30)
    for t, n in topics.items():
        wait_topic_ready(bootstrap, t, n)
