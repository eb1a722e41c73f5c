"""Segment rolling and retention seen from clients: many small segments, reads across and inside
them, and retention.bytes / retention.ms deleting whole old segments (log start offset advances)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from minikafka.protocol.record_batch import iter_headers
from tests.support.helpers import (
    RawClient,
    build_batch,
    confluent_consume,
    confluent_watermarks,
    fetch_all,
    fetch_once,
    list_offset,
    produce_raw,
    wait_until,
)

SEGMENT_BYTES = 20000
PER_BATCH = 10
OFFSET_OUT_OF_RANGE = 1


def _create(bootstrap: str, topic: str, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs or {})])[topic].result(timeout=20)


def _value(i: int) -> bytes:
    return f"rec-{i:06d}-".encode().ljust(100, b"x")


def _produce(bootstrap: str, topic: str, n_batches: int, first: int = 0, timestamp_ms: int | None = None) -> list[bytes]:
    values = []
    with RawClient(bootstrap) as client:
        for b in range(n_batches):
            batch = [_value(first + b * PER_BATCH + i) for i in range(PER_BATCH)]
            resp = produce_raw(client, topic, build_batch(batch, timestamp_ms=timestamp_ms))
            assert resp.error_code == 0, resp
            assert resp.base_offset == first + b * PER_BATCH
            values += batch
    return values


def _segment_files(broker, topic: str) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-0").glob("*.log"))


def _check_segment_files(files: list[Path], segment_bytes: int) -> None:
    """Every segment holds whole batches starting at its base offset and the offsets chain up."""
    expected_base = None
    for path in files:
        data = path.read_bytes()
        headers = list(iter_headers(data))
        assert headers, f"empty rolled segment {path.name}"
        assert headers[-1][0] + headers[-1][1].size == len(data)
        assert headers[0][1].base_offset == int(path.stem)
        if expected_base is not None:
            assert int(path.stem) == expected_base, "gap or overlap between segments"
        expected_base = headers[-1][1].last_offset + 1
        assert len(data) <= segment_bytes, f"{path.name} is {len(data)} bytes > segment.bytes"


@pytest.mark.minikafka_only
def test_broker_segment_bytes_rolls_and_reads_cross_boundaries(broker_factory):
    broker = broker_factory(overrides={"log.segment.bytes": str(SEGMENT_BYTES)})
    topic = "seg-broker"
    _create(broker.bootstrap, topic)
    values = _produce(broker.bootstrap, topic, 300)
    files = _segment_files(broker, topic)
    assert len(files) >= 10, [f.name for f in files]
    _check_segment_files(files, SEGMENT_BYTES)

    # Stock consumer from offset 0 sees everything, in order, across every segment boundary.
    got = confluent_consume(broker.bootstrap, topic, {0: len(values)})[0]
    assert [m.offset() for m in got] == list(range(len(values)))
    assert [m.value() for m in got] == values
    # Raw fetches with a small byte limit step over each boundary one batch at a time.
    assert [v for _o, _k, v in fetch_all(broker.bootstrap, topic, max_bytes=3000)] == values

    # Fetch from an offset in the middle of a later segment (not on a batch boundary).
    seg_base, next_base = int(files[-3].stem), int(files[-2].stem)
    mid = seg_base + ((next_base - seg_base) // 2 // PER_BATCH) * PER_BATCH + 3
    assert seg_base < mid < next_base
    with RawClient(broker.bootstrap) as client:
        p = fetch_once(client, topic, 0, mid, max_bytes=1 << 16)
    assert p.error_code == 0 and p.high_watermark == len(values)
    first_batch = list(iter_headers(bytes(p.records)))[0][1]
    assert first_batch.base_offset <= mid <= first_batch.last_offset, "fetch did not start at the batch holding mid"
    assert fetch_all(broker.bootstrap, topic, start=mid) == [(o, None, values[o]) for o in range(mid, len(values))]
    got = confluent_consume(broker.bootstrap, topic, {0: len(values) - mid}, start={0: mid})[0]
    assert [m.offset() for m in got] == list(range(mid, len(values)))


@pytest.mark.minikafka_only
def test_topic_segment_bytes_config_rolls_only_that_topic(broker):
    _create(broker.bootstrap, "seg-topic-small", {"segment.bytes": str(SEGMENT_BYTES)})
    _create(broker.bootstrap, "seg-topic-default")
    small = _produce(broker.bootstrap, "seg-topic-small", 150)
    _produce(broker.bootstrap, "seg-topic-default", 150)
    files = _segment_files(broker, "seg-topic-small")
    assert len(files) >= 5
    _check_segment_files(files, SEGMENT_BYTES)
    assert len(_segment_files(broker, "seg-topic-default")) == 1
    assert [v for _o, _k, v in fetch_all(broker.bootstrap, "seg-topic-small")] == small
    broker.restart()  # segments are re-opened in order after a restart
    assert [v for _o, _k, v in fetch_all(broker.bootstrap, "seg-topic-small", max_bytes=5000)] == small


def _check_after_retention(broker, topic: str, values: list[bytes]) -> int:
    files = _segment_files(broker, topic)
    earliest = int(files[0].stem)
    assert list_offset(broker.bootstrap, topic, 0, -2) == (0, earliest)
    assert list_offset(broker.bootstrap, topic, 0, -1) == (0, len(values))
    assert confluent_watermarks(broker.bootstrap, topic, 0) == (earliest, len(values))
    # Reading below the log start offset is OFFSET_OUT_OF_RANGE; from earliest everything is there.
    with RawClient(broker.bootstrap) as client:
        p = fetch_once(client, topic, 0, 0)
    assert p.error_code == OFFSET_OUT_OF_RANGE and p.log_start_offset == earliest
    assert fetch_all(broker.bootstrap, topic, start=earliest) == [
        (o, None, values[o]) for o in range(earliest, len(values))]
    # A stock consumer starting from the beginning starts at the new log start offset.
    got = confluent_consume(broker.bootstrap, topic, {0: len(values) - earliest})[0]
    assert [m.offset() for m in got] == list(range(earliest, len(values)))
    return earliest


@pytest.mark.minikafka_only
def test_retention_bytes_deletes_oldest_whole_segments(broker_factory):
    retention = 60000
    broker = broker_factory(overrides={"log.retention.check.interval.ms": "200"})
    topic = "ret-bytes"
    _create(broker.bootstrap, topic, {"segment.bytes": str(SEGMENT_BYTES), "retention.bytes": str(retention)})
    values = _produce(broker.bootstrap, topic, 300)

    def settled() -> bool:
        try:
            sizes = [f.stat().st_size for f in _segment_files(broker, topic)]
        except FileNotFoundError:
            return False  # retention removed a segment between listing and stat: look again
        return sum(sizes) - sizes[0] < retention  # no further segment is deletable

    wait_until(settled, timeout=15, what="retention.bytes to delete old segments")
    time.sleep(0.5)  # one more retention pass must not delete anything else
    files = _segment_files(broker, topic)
    sizes = [f.stat().st_size for f in files]
    assert sum(sizes) >= retention, "retention deleted more than retention.bytes allows"
    assert sum(sizes) - sizes[0] < retention
    earliest = _check_after_retention(broker, topic, values)
    assert earliest > 0
    assert "Traceback" not in broker.log_text(), broker.log_text()
    # The log start offset survives a restart.
    broker.restart()
    assert list_offset(broker.bootstrap, topic, 0, -2) == (0, earliest)


@pytest.mark.minikafka_only
def test_retention_ms_deletes_segments_with_only_old_records(broker_factory):
    broker = broker_factory(overrides={"log.retention.check.interval.ms": "200"})
    topic = "ret-ms"
    retention_ms = 3_600_000
    _create(broker.bootstrap, topic, {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": str(retention_ms)})
    old_ts = int(time.time() * 1000) - 2 * retention_ms
    old = _produce(broker.bootstrap, topic, 100, timestamp_ms=old_ts)
    first_new = len(old)
    new = _produce(broker.bootstrap, topic, 100, first=first_new)
    values = old + new
    cutoff = int(time.time() * 1000) - retention_ms

    def only_recent_segments() -> bool:
        for path in _segment_files(broker, topic):
            if max(h.max_timestamp for _p, h in iter_headers(path.read_bytes())) < cutoff:
                return False
        return True

    wait_until(lambda: list_offset(broker.bootstrap, topic, 0, -2)[1] > 0 and only_recent_segments(),
               timeout=15, what="retention.ms to delete the old segments")
    earliest = _check_after_retention(broker, topic, values)
    assert 0 < earliest <= first_new, "retention.ms deleted records newer than retention.ms"
    assert "Traceback" not in broker.log_text(), broker.log_text()


def test_consumer_positioned_below_log_start_resets_to_earliest(broker):
    """Once the log start offset has moved past 0 (here by DeleteRecords, the state retention leaves
    behind), a Fetch at 0 answers OFFSET_OUT_OF_RANGE with an EMPTY record set, as Apache Kafka does
    (MemoryRecords.EMPTY; verified against Kafka 4.3.1): librdkafka rejects a null record set
    (MessageSetSize -1) as a parse failure, never sees the error and never resets, so a stock consumer
    positioned at 0 must reset to earliest."""
    from confluent_kafka import TopicPartition

    topic = "oor-reset"
    _create(broker.bootstrap, topic)
    values = _produce(broker.bootstrap, topic, 10)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic, 0, 30)]).values()
    assert future.result(10).low_watermark == 30
    earliest = list_offset(broker.bootstrap, topic, 0, -2)[1]
    assert earliest == 30
    with RawClient(broker.bootstrap) as client:
        p = fetch_once(client, topic, 0, 0, version=12)
    assert p.error_code == OFFSET_OUT_OF_RANGE
    assert p.records is not None and len(p.records) == 0, \
        f"Fetch v12 error partition carries a null record set ({p.records!r}); Kafka sends an empty one"
    got = confluent_consume(broker.bootstrap, topic, {0: len(values) - earliest}, start={0: 0}, timeout=8,
                            **{"auto.offset.reset": "earliest"})[0]
    assert [m.offset() for m in got] == list(range(earliest, len(values)))
