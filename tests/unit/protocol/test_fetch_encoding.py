"""Zero-copy Fetch encoding: the EncodedBody the Fetch handler returns, materialised (slices pread)
and decoded by kafka-python, equals — byte for byte and field by field — the FetchResponse the old
path built from record bytes (`PartitionLog.read` + kafka-python's encoder), for every version we
serve (4-17), with and without aborted transactions, empty partitions, byte limits and errors.
Also protocol/fetch_encoding.py on its own, with tagged fields set at every level.
"""
from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import kafka.errors as ke
import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.broker.config.core import BrokerConfig, ConfigError
from minikafka.broker.network.context import RequestContext
from minikafka.broker.errors import error_code
from minikafka.broker.handlers.common import leader_epoch_error
from minikafka.broker.handlers.fetch import handle_fetch
from minikafka.broker.network.response import EncodedBody, FileSlice
from minikafka.broker.state import BrokerState
from minikafka.protocol.fetch_encoding import encode_fetch_response
from minikafka.storage.producer_state import AppendOrigin
from minikafka.storage.txn_markers import build_marker_batch

VERSIONS = range(4, 18)
TopicData = FetchResponse.FetchableTopicResponse
PartitionData = TopicData.PartitionData
Aborted = PartitionData.AbortedTransaction
ReqTopic = FetchRequest.FetchTopic
ReqPartition = ReqTopic.FetchPartition


# ------------------------------------------------------------------------------------ helpers

def materialise(body: EncodedBody) -> bytes:
    """What the connection writes after the size prefix and header: bytes as they are, slices pread."""
    out = bytearray()
    for part in body.parts:
        if isinstance(part, FileSlice):
            data = os.pread(part.fd, part.length, part.offset)
            assert len(data) == part.length
            out += data
        else:
            out += part
    body.close()
    assert len(out) == body.size
    return bytes(out)


def batch(n: int, *, value_size: int = 50, pid: int = -1, epoch: int = -1, seq: int = -1,
          transactional: bool = False) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30, transactional=transactional,
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(timestamp=1_000 + i, key=b"k%d" % i, value=(b"v%d-" % i * value_size)[:value_size], headers=[])
    b.close()
    return bytes(b.buffer())


def marker(plog, pid: int, epoch: int, commit: bool) -> None:
    plog.append(build_marker_batch(pid, epoch, 0, commit, 2_000), origin=AppendOrigin.COORDINATOR)


@pytest.fixture
def broker(tmp_path: Path):
    """A BrokerState with topics: 'plain' (3 partitions: data, data in 3 segments, empty) and 'txn'
    (aborted + committed transactions, then an open one pinning the LSO)."""
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:9",
                           "log.index.interval.bytes": "200"})
    state = BrokerState(config)
    state.load()
    state.catalog.create("plain", 3, 1)
    state.catalog.create("txn", 1, 1)
    p0 = state.catalog.partition_log("plain", 0)
    for i in range(30):
        p0.append(batch(1 + i % 4, value_size=20 + 37 * i))
    p1 = state.catalog.partition_log("plain", 1)
    for i in range(12):
        p1.append(batch(3, value_size=300))
        if i % 4 == 3:
            p1.roll()
    t = state.catalog.partition_log("txn", 0)
    t.append(batch(2))
    t.append(batch(2, pid=100, epoch=0, seq=0, transactional=True))
    t.append(batch(1))
    t.append(batch(3, pid=101, epoch=0, seq=0, transactional=True))
    t.append(batch(2, pid=100, epoch=0, seq=2, transactional=True))
    marker(t, 100, 0, commit=False)  # 100 aborted, first offset 2
    marker(t, 101, 0, commit=True)
    t.append(batch(2, pid=102, epoch=0, seq=0, transactional=True))
    marker(t, 102, 0, commit=False)
    t.append(batch(2))
    t.append(batch(1, pid=103, epoch=0, seq=0, transactional=True))  # open: pins the LSO
    t.append(batch(2))
    assert t.last_stable_offset < t.high_watermark
    yield state
    state.close()


def topic_ids(state) -> dict[str, uuid.UUID]:
    return {info.name: tid for tid, info in state.catalog.by_id.items()}


def request(state, version: int, parts: list[tuple[str, int, int, int]], *, max_bytes: int = 50 << 20,
            isolation: int = 0, leader_epoch: int = -1, session_id: int = 0) -> FetchRequest:
    ids = topic_ids(state)
    topics: dict[str, list] = {}
    for topic, p, offset, pmax in parts:
        topics.setdefault(topic, []).append(ReqPartition(partition=p, current_leader_epoch=leader_epoch,
                                                         fetch_offset=offset, last_fetched_epoch=-1,
                                                         log_start_offset=-1, partition_max_bytes=pmax))
    by_id = version >= 13
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=isolation,
                        session_id=session_id, session_epoch=-1,
                        topics=[ReqTopic(topic_id=ids.get(t, uuid.UUID(int=7)), partitions=ps) if by_id
                                else ReqTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                        forgotten_topics_data=[], rack_id="")


def run_handler(state, version: int, req: FetchRequest):
    ctx = RequestContext(state, version, 1, "test", "127.0.0.1:1")
    return asyncio.run(handle_fetch(ctx, req))


def old_path(state, version: int, req: FetchRequest) -> FetchResponse:
    """The handler as it was before zero copy: PartitionLog.read bytes into a FetchResponse."""
    by_id = version >= 13
    names = {tid: name for name, tid in topic_ids(state).items()}
    max_bytes = min(req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF, state.config.fetch_max_bytes)
    total = 0
    responses = []
    for t in req.topics:
        name = names.get(t.topic_id) if by_id else t.topic
        parts = []
        for p in t.partitions:
            plog = state.catalog.partition_log(name, p.partition) if name is not None else None
            if plog is None:
                code = ke.UnknownTopicIdError.errno if name is None else ke.UnknownTopicOrPartitionError.errno
                parts.append(error_pdata(p.partition, code))
                continue
            code = leader_epoch_error(p.current_leader_epoch)
            if code:
                parts.append(error_pdata(p.partition, code, plog))
                continue
            hw, lso = plog.high_watermark, plog.last_stable_offset
            limit = min(p.partition_max_bytes, max_bytes - total)
            records = b""
            try:
                if limit > 0 or total == 0:
                    records = plog.read(p.fetch_offset, max(limit, 1),
                                        max_offset=lso if req.isolation_level == 1 else None, min_one=total == 0)
            except Exception as exc:
                parts.append(error_pdata(p.partition, error_code(exc), plog))
                continue
            total += len(records)
            aborted = None
            if req.isolation_level == 1:
                aborted = []
                if records:
                    upper = last_offset(records) + 1
                    aborted = [Aborted(producer_id=a.producer_id, first_offset=a.first_offset)
                               for a in plog.collect_aborted_txns(p.fetch_offset, lso) if a.first_offset < upper]
            parts.append(PartitionData(partition_index=p.partition, error_code=0, high_watermark=hw,
                                       last_stable_offset=lso, log_start_offset=plog.log_start_offset,
                                       aborted_transactions=aborted, preferred_read_replica=-1, records=records))
        responses.append(TopicData(topic_id=t.topic_id, partitions=parts) if by_id
                         else TopicData(topic=t.topic, partitions=parts))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)


def last_offset(records: bytes) -> int:
    from minikafka.protocol.record_batch import iter_headers
    return list(iter_headers(records))[-1][1].last_offset


def error_pdata(p: int, code: int, plog=None) -> PartitionData:
    return PartitionData(partition_index=p, error_code=code,
                         high_watermark=plog.high_watermark if plog else -1,
                         last_stable_offset=plog.last_stable_offset if plog else -1,
                         log_start_offset=plog.log_start_offset if plog else -1,
                         aborted_transactions=None, preferred_read_replica=-1, records=b"")


def check_equivalent(state, version: int, req: FetchRequest) -> FetchResponse:
    body = run_handler(state, version, req)
    assert isinstance(body, EncodedBody)
    slices = [p for p in body.parts if isinstance(p, FileSlice)]
    got = materialise(body)
    assert all(s.fd == -1 for s in slices)  # closed by EncodedBody.close
    expected = bytes(old_path(state, version, req).encode(version=version))
    decoded = FetchResponse.decode(got, version=version)
    reference = FetchResponse.decode(expected, version=version)
    assert decoded.throttle_time_ms == reference.throttle_time_ms
    assert decoded.error_code == reference.error_code and decoded.session_id == reference.session_id
    assert len(decoded.responses) == len(reference.responses)
    for t_got, t_exp in zip(decoded.responses, reference.responses):
        assert (t_got.topic, t_got.topic_id) == (t_exp.topic, t_exp.topic_id)
        assert len(t_got.partitions) == len(t_exp.partitions)
        for p_got, p_exp in zip(t_got.partitions, t_exp.partitions):
            for name in ("partition_index", "error_code", "high_watermark", "last_stable_offset",
                         "log_start_offset", "aborted_transactions", "preferred_read_replica", "records",
                         "diverging_epoch", "current_leader", "snapshot_id"):
                assert getattr(p_got, name) == getattr(p_exp, name), (version, name)
    assert decoded == reference
    assert got == expected  # and byte for byte
    return decoded


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# ------------------------------------------------------------------------------------ tests

@pytest.mark.parametrize("version", VERSIONS)
def test_data_empty_partitions_and_errors(broker, version):
    fds = open_fds()
    parts = [("plain", 0, 0, 1 << 20), ("plain", 1, 5, 1 << 20), ("plain", 2, 0, 1 << 20),
             ("plain", 7, 0, 1 << 20),  # unknown partition
             ("plain", 0, 10_000, 1 << 20),  # out of range
             ("txn", 0, 0, 1 << 20), ("nosuch", 0, 0, 1 << 20)]
    decoded = check_equivalent(broker, version, request(broker, version, parts))
    by_part = [(p.partition_index, p.error_code, len(p.records or b"")) for t in decoded.responses for p in t.partitions]
    assert by_part[0][2] > 0 and by_part[1][2] > 0 and by_part[2] == (2, 0, 0)
    assert by_part[3][1] == ke.UnknownTopicOrPartitionError.errno
    assert by_part[4][1] == ke.OffsetOutOfRangeError.errno
    last = decoded.responses[-1].partitions[0].error_code
    assert last == (ke.UnknownTopicIdError.errno if version >= 13 else ke.UnknownTopicOrPartitionError.errno)
    assert open_fds() == fds  # every dup'd descriptor closed


@pytest.mark.parametrize("version", VERSIONS)
def test_read_committed_with_aborted_transactions(broker, version):
    t = broker.catalog.partition_log("txn", 0)
    for offset in range(0, t.last_stable_offset + 1):
        decoded = check_equivalent(broker, version, request(broker, version, [("txn", 0, offset, 1 << 20)],
                                                            isolation=1))
    decoded = check_equivalent(broker, version, request(broker, version, [("txn", 0, 0, 1 << 20)], isolation=1))
    (p,) = decoded.responses[0].partitions
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(100, 2), (102, 12)]
    assert p.last_stable_offset < p.high_watermark
    # read_uncommitted: no aborted list (null), data up to the high watermark
    check_equivalent(broker, version, request(broker, version, [("txn", 0, 0, 1 << 20)], isolation=0))
    # a partition max that stops before the second aborted transaction leaves it out
    decoded = check_equivalent(broker, version, request(broker, version, [("txn", 0, 2, 1)], isolation=1))
    assert [a.producer_id for a in decoded.responses[0].partitions[0].aborted_transactions] == [100]


@pytest.mark.parametrize("version", VERSIONS)
def test_byte_limits_and_kip74(broker, version):
    parts = [("plain", 0, 0, 1 << 20), ("plain", 1, 0, 1 << 20), ("txn", 0, 0, 1 << 20)]
    for max_bytes in (1, 100, 1_000, 3_000, 10_000):
        decoded = check_equivalent(broker, version, request(broker, version, parts, max_bytes=max_bytes))
        sizes = [len(p.records or b"") for t in decoded.responses for p in t.partitions]
        assert sizes[0] > 0  # the first batch goes out whole even over the limit
        if max_bytes == 1:
            assert sizes[1:] == [0, 0]
    for pmax in (1, 500, 2_000):
        check_equivalent(broker, version, request(broker, version, [(t, p, 3, pmax) for t, p, _o, _m in parts]))


def test_broker_fetch_max_bytes_caps_the_request(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "d"), "fetch.max.bytes": "2048"})
    assert config.fetch_max_bytes == 2048
    state = BrokerState(config)
    state.load()
    state.catalog.create("t", 2, 1)
    for p in (0, 1):
        for _ in range(20):
            state.catalog.partition_log("t", p).append(batch(2, value_size=200))
    req = request(state, 12, [("t", 0, 0, 1 << 20), ("t", 1, 0, 1 << 20)], max_bytes=50 << 20)
    decoded = check_equivalent(state, 12, req)
    sizes = [len(p.records or b"") for p in decoded.responses[0].partitions]
    assert 0 < sum(sizes) <= 2048 and sizes[1] == 0
    state.close()
    with pytest.raises(ConfigError):
        BrokerConfig({"log.dirs": str(tmp_path / "d"), "fetch.max.bytes": "1000"})


@pytest.mark.parametrize("version", [4, 11, 12, 17])
def test_leader_epoch_and_session_errors(broker, version):
    check_equivalent(broker, version, request(broker, version, [("plain", 0, 0, 1 << 20)], leader_epoch=5))
    if version >= 7:
        resp = run_handler(broker, version, request(broker, version, [("plain", 0, 0, 1 << 20)], session_id=9))
        assert isinstance(resp, FetchResponse) and resp.error_code == 70


def test_records_are_file_slices_one_per_partition(broker):
    body = run_handler(broker, 12, request(broker, 12, [("plain", 0, 0, 1 << 20), ("plain", 1, 0, 1 << 20),
                                                        ("plain", 2, 0, 1 << 20)]))
    try:
        kinds = [type(p).__name__ for p in body.parts]
        # header bytes, slice, bytes between partitions, slice, trailing bytes (empty partition included)
        assert kinds == ["bytes", "FileSlice", "bytes", "FileSlice", "bytes"]
        assert sum(p.length for p in body.parts if isinstance(p, FileSlice)) > 3_000
        assert all(len(p) < 200 for p in body.parts if not isinstance(p, FileSlice))
    finally:
        body.close()


# ------------------------------------------------------------------ the encoder on its own

@pytest.mark.parametrize("version", VERSIONS)
def test_encoder_keeps_tagged_fields_at_every_level(version):
    """Tagged fields set on the response (node_endpoints), partitions (diverging_epoch,
    current_leader, snapshot_id) and nested aborted transactions: same bytes as kafka-python."""
    resp_kw = {}
    if version >= 16:
        resp_kw["node_endpoints"] = [FetchResponse.NodeEndpoint(node_id=1, host="h", port=9092, rack=None)]

    def pdata(i: int, records: bytes) -> PartitionData:
        kw = {}
        if version >= 12:
            kw = dict(diverging_epoch=PartitionData.EpochEndOffset(epoch=3, end_offset=42),
                      current_leader=PartitionData.LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
                      snapshot_id=PartitionData.SnapshotId(end_offset=7, epoch=2)) if i == 1 else {}
        return PartitionData(partition_index=i, error_code=0, high_watermark=10, last_stable_offset=9,
                             log_start_offset=0, aborted_transactions=[Aborted(producer_id=5, first_offset=1)],
                             preferred_read_replica=-1, records=records, **kw)
    records = [b"", b"r" * 200, b"s" * 70_000]
    full_topics, spliced = [], []
    for n in range(2):
        key = dict(topic_id=uuid.UUID(int=n + 1)) if version >= 13 else dict(topic=f"t{n}")
        full_topics.append(TopicData(partitions=[pdata(i, r) for i, r in enumerate(records)], **key))
        spliced.append((TopicData(partitions=[], **key),
                        [(pdata(i, b""), len(r), [(r[:len(r) // 3], len(r) // 3), (r[len(r) // 3:], len(r) - len(r) // 3)])
                         for i, r in enumerate(records)]))
    full = FetchResponse(throttle_time_ms=5, error_code=0, session_id=0, responses=full_topics, **resp_kw)
    expected = bytes(full.encode(version=version))
    parts, size = encode_fetch_response(
        FetchResponse(throttle_time_ms=5, error_code=0, session_id=0, responses=[], **resp_kw), spliced, version)
    got = b"".join(bytes(p) for p in parts)
    assert size == len(got)
    assert got == expected
    decoded = FetchResponse.decode(got, version=version)
    if version >= 12:
        assert decoded.responses[0].partitions[1].current_leader.leader_epoch == 4
    if version >= 16:
        assert decoded.node_endpoints[0].port == 9092


def test_encoder_refuses_wrong_record_sizes():
    spliced = [(TopicData(topic="t", partitions=[]),
                [(PartitionData(partition_index=0, error_code=0, high_watermark=0, last_stable_offset=0,
                                log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                                records=b""), 10, [(b"12345", 5)])])]
    with pytest.raises(ValueError):
        encode_fetch_response(FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[]), spliced, 11)


@pytest.mark.parametrize("version", [11, 12])
def test_out_of_descriptors_falls_back_to_copied_bytes(broker, version, monkeypatch):
    """With no descriptor to spare (EMFILE), a partition's records are read into the response as
    before instead of failing it; the answer is the same."""
    import errno
    from minikafka.storage import segment

    def no_dup(fd):
        raise OSError(errno.EMFILE, "Too many open files")
    req = request(broker, version, [("plain", 0, 0, 1 << 20), ("plain", 1, 0, 1 << 20), ("txn", 0, 0, 1 << 20)],
                  isolation=1)
    monkeypatch.setattr(segment.os, "dup", no_dup)
    body = run_handler(broker, version, req)
    monkeypatch.undo()
    assert not any(isinstance(p, FileSlice) for p in body.parts)
    got = materialise(body)
    assert got == bytes(old_path(broker, version, req).encode(version=version))
    decoded = FetchResponse.decode(got, version=version)
    assert [a.producer_id for a in decoded.responses[1].partitions[0].aborted_transactions] == [100, 102]
