"""Idempotent producer (KIP-98, KIP-360): sequence checks, last-5 dedupe, epochs, pipelining, and
exactly-once delivery through dropped replies and broker restarts.

The raw-protocol tests build idempotent batches with kafka-python's DefaultRecordBatchBuilder and run
against Apache Kafka too (`--broker=kafka`); the codes they assert are what Kafka 4.3.1 answers:
- a retry of any of the producer's last 5 batches: error 0, the original base offset, and the original
  batch timestamp as log_append_time_ms; nothing is appended;
- a retry of the 6th-oldest batch, a sequence gap, a partial overlap, and a new epoch starting at a
  sequence other than 0: OUT_OF_ORDER_SEQUENCE_NUMBER (45);
- an older epoch (even for a retry of an old batch): INVALID_PRODUCER_EPOCH (47);
- a producer id the partition has no state for: accepted at any sequence;
- DeleteRecords does not remove producer state (Kafka keeps it until producer.id.expiration.ms): a retry
  of a deleted batch still answers its original offset, and a gap is still 45;
- sequences wrap from 2^31-1 to 0.
The fault-injection tests (a loopback proxy that drops replies, kill -9, corrupted snapshots) need a
minikafka they can control.
"""
from __future__ import annotations

import importlib.util
import re
import sys
import time
from pathlib import Path

import pytest
from kafka.protocol.admin import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.support.fault_proxy import FaultProxy
from tests.support.helpers import (
    RawClient,
    fetch_all,
    list_offset,
    produce_raw,
    produce_request,
    wait_broker_connections_closed,
    wait_topic_ready,
)

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_TOPIC_OR_PARTITION = 3
INT32_MAX = 2**31 - 1
ROOT = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------- helpers

def idem_batch(pid: int, epoch: int, seq: int, n: int = 1, *, tag: str = "v", ts: int | None = None) -> bytes:
    """One idempotent batch of `n` records with values `<tag><seq + i>`."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    ts = int(time.time() * 1000) if ts is None else ts
    for i in range(n):
        assert b.append(i, timestamp=ts, key=None, value=f"{tag}{seq + i}".encode(), headers=[]) is not None
    return bytes(b.build())


def new_producer_id(client: RawClient) -> tuple[int, int]:
    """InitProducerId without a transactional id (Kafka may need a moment after start-up)."""
    deadline = time.monotonic() + 30
    while True:
        r = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                 producer_id=-1, producer_epoch=-1), 4, InitProducerIdResponse)
        if r.error_code == 0:
            return r.producer_id, r.producer_epoch
        assert time.monotonic() < deadline, f"InitProducerId error {r.error_code}"
        time.sleep(0.2)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(30)
    wait_topic_ready(bootstrap, topic, partitions)


def log_end(bootstrap: str, topic: str, partition: int = 0) -> int:
    code, offset = list_offset(bootstrap, topic, partition)
    assert code == 0
    return offset


def values(bootstrap: str, topic: str, partition: int = 0) -> list[bytes]:
    return [v for _off, _key, v in fetch_all(bootstrap, topic, partition)]


def describe_producers(client: RawClient, topics: dict[str, list[int]]):
    req = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
                                           for t, ps in topics.items()])
    return client.request(req, 0, DescribeProducersResponse)


def delete_records(client: RawClient, topic: str, offset: int) -> int:
    T = DeleteRecordsRequest.DeleteRecordsTopic
    r = client.request(DeleteRecordsRequest(topics=[T(name=topic, partitions=[T.DeleteRecordsPartition(
        partition_index=0, offset=offset)])], timeout_ms=10000), 2, DeleteRecordsResponse)
    (p,) = r.topics[0].partitions
    assert p.error_code == 0
    return p.low_watermark


@pytest.fixture(scope="module")
def kb(shared_broker):
    yield shared_broker
    wait_broker_connections_closed(shared_broker)


@pytest.fixture
def producer_setup(kb, request):
    """(client, topic, pid, epoch): a fresh one-partition topic and a fresh producer id."""
    topic = "idem-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:60]
    create_topic(kb.bootstrap, topic)
    client = RawClient(kb.bootstrap)
    pid, epoch = new_producer_id(client)
    assert epoch == 0
    yield client, topic, pid, epoch
    client.close()


# ---------------------------------------------------------------- raw protocol: Kafka's answers

def test_resend_of_the_same_batch_returns_the_same_offset_and_appends_once(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    assert produce_raw(c, topic, idem_batch(pid, 0, 0, 2)).base_offset == 0
    batch = idem_batch(pid, 0, 2, 3, ts=1_700_000_123_456)
    first = produce_raw(c, topic, batch)
    assert (first.error_code, first.base_offset, first.log_append_time_ms) == (0, 2, -1)
    for _ in range(3):
        again = produce_raw(c, topic, batch)
        # Kafka answers a duplicate with the original offsets and the original batch timestamp
        assert (again.error_code, again.base_offset, again.log_append_time_ms, again.log_start_offset) == \
            (0, 2, 1_700_000_123_456, 0)
    assert log_end(kb.bootstrap, topic) == 5
    assert values(kb.bootstrap, topic) == [b"v0", b"v1", b"v2", b"v3", b"v4"]


def test_resend_of_each_of_the_last_five_batches_returns_its_original_offset(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    batches = [idem_batch(pid, 0, 3 * i, 3) for i in range(6)]
    assert [produce_raw(c, topic, b).base_offset for b in batches] == [0, 3, 6, 9, 12, 15]
    for i in (5, 1, 4, 2, 3):
        r = produce_raw(c, topic, batches[i])
        assert (r.error_code, r.base_offset) == (0, 3 * i)
    oldest = produce_raw(c, topic, batches[0])  # the 6th-oldest is no longer remembered
    assert (oldest.error_code, oldest.base_offset) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert oldest.log_start_offset == 0  # Kafka reports the log start offset with this error
    overlap = produce_raw(c, topic, idem_batch(pid, 0, 16, 2))  # inside the last batch, not equal to it
    assert overlap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_end(kb.bootstrap, topic) == 18
    assert produce_raw(c, topic, idem_batch(pid, 0, 18)).base_offset == 18


def test_sequence_gap_is_out_of_order(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    assert produce_raw(c, topic, idem_batch(pid, 0, 0, 2)).error_code == 0
    for seq in (3, 100, 1, INT32_MAX):
        assert produce_raw(c, topic, idem_batch(pid, 0, seq)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_end(kb.bootstrap, topic) == 2
    assert produce_raw(c, topic, idem_batch(pid, 0, 2)).base_offset == 2


def test_stale_epoch_is_fenced(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    old = idem_batch(pid, 0, 0, 2)
    assert produce_raw(c, topic, old).error_code == 0
    assert produce_raw(c, topic, idem_batch(pid, 1, 0)).base_offset == 2  # KIP-360: bumped, back to 0
    assert produce_raw(c, topic, idem_batch(pid, 0, 2)).error_code == INVALID_PRODUCER_EPOCH
    assert produce_raw(c, topic, old).error_code == INVALID_PRODUCER_EPOCH  # a retry does not bypass it
    assert produce_raw(c, topic, idem_batch(pid, 1, 1)).base_offset == 3
    assert produce_raw(c, topic, idem_batch(pid, 5, 0)).base_offset == 4  # epochs may jump
    assert produce_raw(c, topic, idem_batch(pid, 4, 0)).error_code == INVALID_PRODUCER_EPOCH
    assert log_end(kb.bootstrap, topic) == 5


def test_new_epoch_must_start_at_sequence_zero(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    assert produce_raw(c, topic, idem_batch(pid, 0, 0, 3)).error_code == 0
    assert produce_raw(c, topic, idem_batch(pid, 1, 3)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_raw(c, topic, idem_batch(pid, 1, 0)).base_offset == 3
    assert produce_raw(c, topic, idem_batch(pid, 1, 1)).base_offset == 4


def test_producer_without_state_is_accepted_at_any_sequence(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    assert produce_raw(c, topic, idem_batch(pid, 0, 7, 3)).base_offset == 0
    assert produce_raw(c, topic, idem_batch(pid, 0, 10)).base_offset == 3
    assert produce_raw(c, topic, idem_batch(pid, 3, 9)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    # Kafka does not check idempotent producer ids against the ones it handed out
    assert produce_raw(c, topic, idem_batch(pid + 10**9, 0, 42)).base_offset == 4


def test_delete_records_keeps_producer_state_as_kafka_does(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    batches = [idem_batch(pid, 0, 3 * i, 3) for i in range(3)]
    for b in batches:
        assert produce_raw(c, topic, b).error_code == 0
    assert delete_records(c, topic, 9) == 9  # every batch of this producer is gone
    dup = produce_raw(c, topic, batches[2])
    assert (dup.error_code, dup.base_offset, dup.log_start_offset) == (0, 6, 9)  # still deduped
    gap = produce_raw(c, topic, idem_batch(pid, 0, 50))
    assert (gap.error_code, gap.log_start_offset) == (OUT_OF_ORDER_SEQUENCE_NUMBER, 9)
    nxt = produce_raw(c, topic, idem_batch(pid, 0, 9))
    assert (nxt.error_code, nxt.base_offset, nxt.log_start_offset) == (0, 9, 9)


def test_sequence_wraps_at_int32_max(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    assert produce_raw(c, topic, idem_batch(pid, 0, INT32_MAX - 1, 2)).base_offset == 0
    assert produce_raw(c, topic, idem_batch(pid, 0, 0, 2)).base_offset == 2  # after 2^31-1 comes 0
    pid2, _ = new_producer_id(c)
    spanning = idem_batch(pid2, 0, INT32_MAX, 3)  # sequences 2^31-1, 0, 1
    assert produce_raw(c, topic, spanning).base_offset == 4
    assert produce_raw(c, topic, spanning).base_offset == 4  # a retry across the wrap is a duplicate
    assert produce_raw(c, topic, idem_batch(pid2, 0, 3)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_raw(c, topic, idem_batch(pid2, 0, 2)).base_offset == 7


def test_pipelined_requests_are_handled_in_order(kb, producer_setup):
    """Six Produce requests in flight on one connection (clients use up to 5), the last a retry of the
    second: answers come back in request order with the offsets of sequential processing."""
    c, topic, pid, _ = producer_setup
    batches = [idem_batch(pid, 0, 2 * i, 2) for i in range(5)]
    frames = [c.encode(produce_request(topic, b), 9) for b in [*batches, batches[1]]]
    c.send_bytes(b"".join(frames))
    answers = []
    for _ in frames:
        resp = ProduceResponse.decode(c.recv_frame(), version=9, header=True)
        (p,) = resp.responses[0].partition_responses
        answers.append((resp.header.correlation_id, p.error_code, p.base_offset))
    first_id = c.correlation_id - len(frames) + 1
    assert answers == [(first_id + i, 0, off) for i, off in enumerate([0, 2, 4, 6, 8, 2])]
    assert log_end(kb.bootstrap, topic) == 10
    assert values(kb.bootstrap, topic) == [f"v{i}".encode() for i in range(10)]


def test_describe_producers(kb, producer_setup):
    c, topic, pid, _ = producer_setup
    ts = int(time.time() * 1000)
    produce_raw(c, topic, idem_batch(pid, 0, 0, 4, ts=ts))
    pid2, _ = new_producer_id(c)
    produce_raw(c, topic, idem_batch(pid2, 0, 40, 1, ts=ts + 1))
    produce_raw(c, topic, idem_batch(pid2, 2, 0, 2, ts=ts + 2))
    r = describe_producers(c, {topic: [0, 5], "idem-no-such-topic": [0]})
    (mine, missing) = r.topics
    part0, part5 = mine.partitions
    assert part0.error_code == 0
    got = {(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
            s.current_txn_start_offset) for s in part0.active_producers}
    assert got == {(pid, 0, 3, ts, -1, -1), (pid2, 2, 1, ts + 2, -1, -1)}
    assert (part5.error_code, part5.active_producers) == (UNKNOWN_TOPIC_OR_PARTITION, [])
    assert [(p.partition_index, p.error_code) for p in missing.partitions] == [(0, UNKNOWN_TOPIC_OR_PARTITION)]


# ---------------------------------------------------------------- minikafka: faults and restarts

def _confluent_producer(bootstrap: str, **extra):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
            "batch.num.messages": 500, "message.timeout.ms": 120_000, "retry.backoff.ms": 20,
            "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 200}
    conf.update(extra)
    errors: list[str] = []

    def on_error(err) -> None:
        # disconnects and "all brokers down" are expected here; anything fatal or about sequences is not
        if err.fatal() or "sequence" in err.str().lower():
            errors.append(f"error_cb: {err}")
    conf["error_cb"] = on_error
    return Producer(conf), errors


def _produce_sequence(producer, errors: list[str], topic: str, partitions: int, start: int, stop: int,
                      delivered: list[int] | None = None) -> None:
    """Values `<partition>:<n>` for n in [start, stop), round-robin over partitions, each in order."""
    def report(err, msg):
        if err is not None:
            errors.append(f"delivery {msg.partition()}:{msg.value()!r}: {err}")
        elif delivered is not None:
            delivered[0] += 1
    for n in range(start, stop):
        p = n % partitions
        while True:
            try:
                producer.produce(topic, value=b"%d:%d" % (p, n // partitions), partition=p, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if n % 1000 == 0:
            producer.poll(0)


def _assert_exactly_once_in_order(bootstrap: str, topic: str, partitions: int, total: int) -> None:
    for p in range(partitions):
        expected = [b"%d:%d" % (p, i) for i in range(len(range(p, total, partitions)))]
        got = values(bootstrap, topic, p)
        assert len(got) == len(expected), f"partition {p}: {len(got)} records, expected {len(expected)}"
        assert got == expected, f"partition {p}: first difference at " \
                                f"{next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)}"


def _producer_epochs(bootstrap: str, topic: str, partitions: int) -> set[int]:
    with RawClient(bootstrap) as c:
        r = describe_producers(c, {topic: list(range(partitions))})
    return {s.producer_epoch for p in r.topics[0].partitions for s in p.active_producers}


@pytest.mark.minikafka_only  # the proxy needs the broker to advertise the proxy's address
def test_confluent_idempotent_producer_through_dropped_replies(broker_factory):
    proxy = FaultProxy(seed=20240917, cut_probability=0.08, max_cuts=25)
    broker = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.start(("127.0.0.1", broker.port))
    topic, partitions, total = "idem-proxy", 6, 100_000
    try:
        create_topic(proxy.bootstrap, topic, partitions)
        producer, errors = _confluent_producer(proxy.bootstrap)
        _produce_sequence(producer, errors, topic, partitions, 0, total)
        assert producer.flush(90) == 0
        del producer
    finally:
        proxy.stop()
    assert not errors, errors[:10]
    print(f"proxy: {proxy.cuts} cuts over {proxy.connections} connections")
    assert proxy.cuts >= 5, f"only {proxy.cuts} replies dropped over {proxy.connections} connections"
    _assert_exactly_once_in_order(broker.bootstrap, topic, partitions, total)
    # librdkafka never had to bump its epoch (which it does after OUT_OF_ORDER_SEQUENCE_NUMBER)
    assert _producer_epochs(broker.bootstrap, topic, partitions) == {0}


def test_kill_9_mid_load_then_the_same_producer_continues(broker_factory):
    broker = broker_factory()
    topic, partitions, total = "idem-kill", 3, 30_000
    create_topic(broker.bootstrap, topic, partitions)
    producer, errors = _confluent_producer(broker.bootstrap)
    delivered = [0]
    _produce_sequence(producer, errors, topic, partitions, 0, total // 2, delivered)
    deadline = time.monotonic() + 30
    while delivered[0] < total // 8:  # part of it acknowledged, the rest in flight or queued
        assert time.monotonic() < deadline, f"only {delivered[0]} delivered"
        producer.poll(0.001)
    broker.kill()
    assert delivered[0] < total // 2, "everything was delivered before the kill"
    _produce_sequence(producer, errors, topic, partitions, total // 2, 2 * total // 3)
    time.sleep(0.3)
    broker.start()  # same data dir, same port
    _produce_sequence(producer, errors, topic, partitions, 2 * total // 3, total)
    assert producer.flush(60) == 0
    del producer
    assert not errors, errors[:10]
    _assert_exactly_once_in_order(broker.bootstrap, topic, partitions, total)
    assert _producer_epochs(broker.bootstrap, topic, partitions) == {0}
    replayed = re.findall(rf"producer state of {topic}-\d+: .*replayed (\d+) batches", broker.log_text())
    assert len(replayed) == partitions and all(int(n) > 0 for n in replayed), broker.log_text()


def _fill_with_rolls(bootstrap: str, topic: str, batches: int) -> tuple[RawClient, int, list[bytes]]:
    c = RawClient(bootstrap)
    pid, _ = new_producer_id(c)
    sent = [idem_batch(pid, 0, 3 * i, 3, tag="r") for i in range(batches)]
    for i, b in enumerate(sent):
        assert produce_raw(c, topic, b).base_offset == 3 * i
    return c, pid, sent


def _replay_line(broker, topic: str) -> str:
    list_offset(broker.bootstrap, topic, 0)  # a partition's log (and its producer state) loads on first use
    lines = re.findall(rf"producer state of {topic}-0: [^\n]*", broker.log_text())
    assert lines, broker.log_text()
    return lines[-1]


def test_restart_loads_the_snapshot_instead_of_replaying_the_log(broker_factory):
    broker = broker_factory({"log.segment.bytes": "1024"})
    topic = "idem-snap"
    create_topic(broker.bootstrap, topic)
    c, pid, sent = _fill_with_rolls(broker.bootstrap, topic, 60)
    c.close()
    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    snapshots = sorted((broker.data_dir / f"{topic}-0").glob("*.snapshot"))
    assert len(segments) > 3 and [s.stem for s in snapshots] == [s.stem for s in segments[1:]]

    broker.kill()  # no clean-shutdown snapshot: the last roll's snapshot plus the active segment
    broker.start()
    m = re.search(r"snapshot at offset (\d+), replayed (\d+) batches", _replay_line(broker, topic))
    assert m, _replay_line(broker, topic)
    assert int(m.group(1)) == int(segments[-1].stem) and 0 < int(m.group(2)) < 60
    with RawClient(broker.bootstrap) as c:
        for i in range(55, 60):  # the whole 5-batch window survived: every retry dedupes
            r = produce_raw(c, topic, sent[i])
            assert (r.error_code, r.base_offset) == (0, 3 * i)
        assert produce_raw(c, topic, idem_batch(pid, 0, 200)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce_raw(c, topic, idem_batch(pid, 0, 180, tag="r")).base_offset == 180

    broker.stop()  # clean: a snapshot at the log end, nothing to replay
    broker.start()
    assert re.search(r"snapshot at offset 181, replayed 0 batches", _replay_line(broker, topic))
    with RawClient(broker.bootstrap) as c:
        assert produce_raw(c, topic, idem_batch(pid, 0, 180, tag="r")).base_offset == 180
        assert produce_raw(c, topic, idem_batch(pid, 0, 181, tag="r")).base_offset == 181
    assert values(broker.bootstrap, topic) == [f"r{i}".encode() for i in range(182)]


def test_corrupt_snapshot_is_skipped_and_state_rebuilt_from_the_log(broker_factory):
    broker = broker_factory({"log.segment.bytes": "1024"})
    topic = "idem-corrupt"
    create_topic(broker.bootstrap, topic)
    c, pid, sent = _fill_with_rolls(broker.bootstrap, topic, 40)
    c.close()
    broker.stop()
    part = broker.data_dir / f"{topic}-0"
    for snap in part.glob("*.snapshot"):  # every snapshot: nothing to fall back on but the log
        data = bytearray(snap.read_bytes())
        data[len(data) // 2] ^= 0x5A
        snap.write_bytes(bytes(data))
    broker.start()
    list_offset(broker.bootstrap, topic, 0)  # opened on first use
    text = broker.log_text()
    assert "ignoring producer state snapshot" in text and "CRC" in text, text
    assert re.search(r"no snapshot, replayed 40 batches from offset 0", _replay_line(broker, topic))
    with RawClient(broker.bootstrap) as c:
        for i in range(35, 40):
            r = produce_raw(c, topic, sent[i])
            assert (r.error_code, r.base_offset) == (0, 3 * i)
        assert produce_raw(c, topic, sent[34]).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce_raw(c, topic, idem_batch(pid, 0, 120, tag="r")).base_offset == 120
    assert log_end(broker.bootstrap, topic) == 121


def _reference_lab():
    name = "minikafka_reference_lab"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "apache_kafka.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def test_snapshot_file_is_readable_by_kafka_dump_log(broker_factory):
    lab = _reference_lab()
    lab.fetch()  # idempotent; fails loudly (never skips) if Maven Central cannot be reached
    broker = broker_factory()
    topic = "idem-dump"
    create_topic(broker.bootstrap, topic)
    with RawClient(broker.bootstrap) as c:
        pid, _ = new_producer_id(c)
        produce_raw(c, topic, idem_batch(pid, 0, 0, 3, ts=1_700_000_000_000))
        produce_raw(c, topic, idem_batch(pid, 0, 3, 2, ts=1_700_000_000_001))
    broker.stop()
    snap = broker.data_dir / f"{topic}-0" / f"{5:020d}.snapshot"
    res = lab.run_tool("kafka-dump-log", ["--files", str(snap)], timeout=60)
    assert res.returncode == 0, res.stderr
    assert (f"producerId: {pid} producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
            "lastTimestamp: 1700000000001 firstSequence: 3 lastSequence: 4 lastOffset: 4 offsetDelta: 1 "
            "timestamp: 1700000000001") in res.stdout, res.stdout
