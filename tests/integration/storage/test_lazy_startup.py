"""Lazy start-up: a restarted broker answers Metadata before opening any partition log; a log opens
(and is recovered if needed) when first used, or in the background; the clean/unclean state of
partitions that were never opened is kept across clean shutdowns and dropped by a crash.

Opening is observed from the outside through damage left in the files while the broker was down:
- a torn tail (half a batch appended to the last segment) is cut away by any open, clean or not;
- a flipped byte inside the first batch of the last segment (every batch indexed,
  log.index.interval.bytes=0) is found only by the full recovery of an unclean open, which truncates
  the log there; a clean open checks the tail after the last index entry only.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.helpers import (
    RawClient,
    build_batch,
    confluent_consume,
    fetch_all,
    list_offset,
    metadata_raw,
    produce_raw,
    wait_until,
)

pytestmark = pytest.mark.minikafka_only

LAZY = {"minikafka.log.open.background": "false", "log.index.interval.bytes": "0"}
TORN = build_batch([b"torn" * 10])[:30]


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _produce_raw_each(bootstrap: str, topic: str, partitions: range, batches: int = 3) -> None:
    with RawClient(bootstrap) as c:
        for p in partitions:
            for b in range(batches):
                r = produce_raw(c, topic, build_batch([f"{p}-{b}-{i}".encode() for i in range(2)]), partition=p)
                assert r.error_code == 0, r


def _expected(partitions: range, batches: int = 3) -> dict[int, list[bytes]]:
    return {p: [f"{p}-{b}-{i}".encode() for b in range(batches) for i in range(2)] for p in partitions}


def _last_segment(broker, topic: str, partition: int) -> Path:
    return sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log"))[-1]


def _tear(broker, topic: str, partition: int) -> int:
    """Append half a batch to the partition's last segment; returns the size before."""
    seg = _last_segment(broker, topic, partition)
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(TORN)
    return size


def _corrupt_first_batch(broker, topic: str, partition: int) -> None:
    seg = _last_segment(broker, topic, partition)
    data = bytearray(seg.read_bytes())
    data[70] ^= 0x5A  # inside the first record: covered by the batch CRC only
    seg.write_bytes(bytes(data))


def _values(broker, topic: str, partition: int) -> list[bytes]:
    return [v for _o, _k, v in fetch_all(broker.bootstrap, topic, partition)]


def test_restart_with_many_partitions_opens_logs_on_first_use(broker_factory):
    """300 partitions written by a stock client; after a clean restart Metadata lists them all while no
    log is open (every torn tail still there), a produce opens just its partition, and a stock consumer
    then reads every partition intact."""
    n = 300
    broker = broker_factory(LAZY)
    topic = "lazy-many"
    _create(broker.bootstrap, topic, n)
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in range(n):
        for i in range(3):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    assert broker.stop() == 0
    sizes = {p: _tear(broker, topic, p) for p in range(n)}

    broker.start()
    t0 = time.monotonic()
    with RawClient(broker.bootstrap) as c:
        md = metadata_raw(c, [topic])
        elapsed = time.monotonic() - t0
        assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == n
        md_all = metadata_raw(c)
        assert [len(t.partitions) for t in md_all.topics if t.name == topic] == [n]
        time.sleep(0.5)
        assert all(_last_segment(broker, topic, p).stat().st_size == sizes[p] + len(TORN) for p in range(n)), \
            "Metadata opened partition logs"
        r = produce_raw(c, topic, build_batch([b"after"]), partition=7)
        assert (r.error_code, r.base_offset) == (0, 3)
    assert _last_segment(broker, topic, 7).stat().st_size > sizes[7]  # opened: torn tail cut, batch appended
    assert _last_segment(broker, topic, 8).stat().st_size == sizes[8] + len(TORN)  # still unopened
    assert elapsed < 5, f"Metadata took {elapsed:.1f} s after a restart"

    got = confluent_consume(broker.bootstrap, topic, {p: 4 if p == 7 else 3 for p in range(n)}, timeout=60)
    for p in range(n):
        want = [f"{p}-{i}".encode() for i in range(3)] + ([b"after"] if p == 7 else [])
        assert [m.value() for m in got[p]] == want, p
    assert all(_last_segment(broker, topic, p).stat().st_size == sizes[p] for p in range(n) if p != 7)
    assert "Traceback" not in broker.log_text()


def test_kill_after_a_clean_start_recovers_partitions_never_opened(broker_factory):
    """A clean start consumes the clean-shutdown marker; after a kill -9 every partition is recovered as
    unclean on the next start, including those the crashed run never opened."""
    broker = broker_factory(LAZY)
    topic = "lazy-kill"
    parts = range(6)
    _create(broker.bootstrap, topic, len(parts))
    _produce_raw_each(broker.bootstrap, topic, parts)
    assert broker.stop() == 0

    broker.start()  # clean start
    with RawClient(broker.bootstrap) as c:  # opens partition 0 only
        assert produce_raw(c, topic, build_batch([b"p0-more"]), partition=0).error_code == 0
    broker.kill()
    _tear(broker, topic, 0)
    size4 = _tear(broker, topic, 4)
    _corrupt_first_batch(broker, topic, 3)  # never opened in the crashed run: full recovery finds it

    broker.start()
    expected = _expected(parts)
    expected[0].append(b"p0-more")
    expected[3] = []  # truncated at its first (corrupted) batch
    for p in parts:
        assert _values(broker, topic, p) == expected[p], p
        assert list_offset(broker.bootstrap, topic, p) == (0, len(expected[p]))
    assert _last_segment(broker, topic, 4).stat().st_size == size4
    with RawClient(broker.bootstrap) as c:
        r = produce_raw(c, topic, build_batch([b"p3-new"]), partition=3)
    assert (r.error_code, r.base_offset) == (0, 0)
    assert broker.stop() == 0


def test_clean_shutdown_keeps_never_opened_partitions_unclean(broker_factory):
    """After a crash, a run that opens only some partitions and shuts down cleanly must not mark the
    others clean: they still get a full recovery when opened later."""
    broker = broker_factory(LAZY)
    topic = "lazy-pending"
    parts = range(4)
    _create(broker.bootstrap, topic, len(parts))
    _produce_raw_each(broker.bootstrap, topic, parts)
    broker.kill()
    _corrupt_first_batch(broker, topic, 2)

    broker.start()  # unclean start: opens partition 0 only, then a clean shutdown
    assert _values(broker, topic, 0) == _expected(parts)[0]
    assert broker.stop() == 0
    assert "lazy-pending-2" in (broker.data_dir / ".minikafka_recovery_pending").read_text()

    broker.start()
    expected = _expected(parts)
    expected[2] = []
    for p in parts:
        assert _values(broker, topic, p) == expected[p], p
    assert broker.stop() == 0
    assert not (broker.data_dir / ".minikafka_recovery_pending").exists()


def test_background_opening_recovers_every_partition_without_clients(broker_factory):
    broker = broker_factory({"log.index.interval.bytes": "0"})
    topic = "lazy-background"
    parts = range(20)
    _create(broker.bootstrap, topic, len(parts))
    _produce_raw_each(broker.bootstrap, topic, parts, batches=2)
    assert broker.stop() == 0
    sizes = {p: _tear(broker, topic, p) for p in parts}
    broker.start()
    wait_until(lambda: all(_last_segment(broker, topic, p).stat().st_size == sizes[p] for p in parts),
               timeout=30, what="every torn tail cut by the background opener")
    wait_until(lambda: "in the background" in broker.log_text(), timeout=10, what="background opening logged")
    for p in (0, 19):
        assert _values(broker, topic, p) == _expected(parts, 2)[p]
