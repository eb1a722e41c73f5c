"""Recovery from a torn or corrupted log tail (what a crash mid-write or a bad disk leaves behind).

The broker is stopped, the last segment's `.log` is truncated at a random byte (optionally with its
indexes deleted or overwritten with garbage), or a byte of the final batch is flipped; after a restart
the log must end at the last whole, valid batch: consumers see a prefix of what was sent, nothing
garbled, and new produces continue at the log end offset.
"""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from minikafka.protocol.record_batch import iter_headers
from tests.support.helpers import RawClient, build_batch, fetch_all, list_offset, metadata_raw, produce_raw

BATCHES = 150
PER_BATCH = 20
SEGMENT_BYTES = 100_000


def _fill(broker, topic: str) -> list[bytes]:
    """Produce BATCHES batches of PER_BATCH records; returns the values in offset order."""
    sent: list[bytes] = []
    with RawClient(broker.bootstrap) as client:
        metadata_raw(client, [topic], auto_create=True)  # Produce does not auto-create topics
        for b in range(BATCHES):
            values = [f"{topic}-{b:04d}-{i:02d}-".encode() + bytes([65 + (b + i) % 26]) * 40 for i in range(PER_BATCH)]
            resp = produce_raw(client, topic, build_batch(values, keys=[f"k{i}".encode() for i in range(PER_BATCH)]))
            assert resp.error_code == 0, resp
            assert resp.base_offset == len(sent)
            sent += values
    return sent


def _segments(broker, topic: str) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-0").glob("*.log"))


def _batch_ends(log_path: Path) -> list[tuple[int, int, int]]:
    """(start position, end position, next offset) of every batch in a segment file."""
    data = log_path.read_bytes()
    out = [(pos, pos + h.size, h.last_offset + 1) for pos, h in iter_headers(data)]
    assert out and out[-1][1] == len(data), "segment did not end on a batch boundary before the test cut it"
    return out


def _shut_down(broker, how: str) -> None:
    if how == "sigterm":
        assert broker.stop() == 0
    else:
        broker.kill()


def _check_recovered(broker, topic: str, sent: list[bytes], expected_leo: int) -> None:
    assert list_offset(broker.bootstrap, topic, 0, -1) == (0, expected_leo)
    records = fetch_all(broker.bootstrap, topic)
    assert [o for o, _k, _v in records] == list(range(expected_leo))
    assert [v for _o, _k, v in records] == sent[:expected_leo], "recovered log is not a prefix of what was sent"
    assert all(k == f"k{o % PER_BATCH}".encode() for o, k, _v in records)
    # New produce continues at the log end offset and is readable.
    with RawClient(broker.bootstrap) as client:
        resp = produce_raw(client, topic, build_batch([b"after-1", b"after-2"]))
    assert resp.error_code == 0 and resp.base_offset == expected_leo, resp
    assert fetch_all(broker.bootstrap, topic, start=expected_leo) == [
        (expected_leo, None, b"after-1"), (expected_leo + 1, None, b"after-2")]
    assert "Traceback" not in broker.log_text(), broker.log_text()


@pytest.mark.minikafka_only
@pytest.mark.parametrize("seed,index_damage,how", [
    (11, "none", "sigterm"),
    (22, "deleted", "kill"),
    (33, "garbage", "sigterm"),
])
def test_truncated_last_segment_recovers_to_last_whole_batch(broker_factory, seed, index_damage, how):
    broker = broker_factory(overrides={"log.segment.bytes": str(SEGMENT_BYTES)})
    topic = f"torn-{seed}"
    sent = _fill(broker, topic)
    _shut_down(broker, how)
    segments = _segments(broker, topic)
    assert len(segments) >= 2, "expected several segments"
    last = segments[-1]
    batches = _batch_ends(last)
    rng = random.Random(seed)
    size = last.stat().st_size
    cut = rng.randrange(1, size)
    os.truncate(last, cut)
    whole = [b for b in batches if b[1] <= cut]
    expected_leo = whole[-1][2] if whole else int(last.stem)
    expected_size = whole[-1][1] if whole else 0
    if index_damage == "deleted":
        last.with_suffix(".index").unlink()
        last.with_suffix(".timeindex").unlink()
    elif index_damage == "garbage":
        last.with_suffix(".index").write_bytes(rng.randbytes(8 * 7 + 3))
        last.with_suffix(".timeindex").write_bytes(rng.randbytes(12 * 5))
    earlier = {p: p.read_bytes() for p in segments[:-1]}

    broker.start()
    list_offset(broker.bootstrap, topic, 0, -1)  # a partition's log is opened (and recovered) on first use
    assert last.stat().st_size == expected_size, "torn bytes were not truncated away"
    for p, data in earlier.items():
        assert p.read_bytes() == data, f"recovery changed an earlier segment {p.name}"
    _check_recovered(broker, topic, sent, expected_leo)


@pytest.mark.minikafka_only
@pytest.mark.parametrize("how", ["sigterm", "kill"])
def test_crc_corrupted_final_batch_is_truncated(broker_factory, how):
    broker = broker_factory(overrides={"log.segment.bytes": str(SEGMENT_BYTES)})
    topic = f"crc-tail-{how}"
    sent = _fill(broker, topic)
    _shut_down(broker, how)
    last = _segments(broker, topic)[-1]
    batches = _batch_ends(last)
    start, end, _next = batches[-1]
    expected_leo = len(sent) - PER_BATCH
    # Flip one byte inside the last record's value (covered by the CRC, not by any length field).
    data = bytearray(last.read_bytes())
    data[end - 5] ^= 0x5A
    last.write_bytes(bytes(data))

    broker.start()
    list_offset(broker.bootstrap, topic, 0, -1)  # opened (and recovered) on first use
    assert last.stat().st_size == start, "the corrupted batch was not truncated away"
    _check_recovered(broker, topic, sent, expected_leo)
