"""The share-partition state machine (broker/share/partition.py): acquisition, acknowledgement, release, lock
expiry, the delivery-count limit, the in-flight window bound and the persisted runs."""
from __future__ import annotations

from minikafka.broker.share.partition import (
    ACCEPT, ACKNOWLEDGED, ARCHIVED, AVAILABLE, GAP, RELEASE, REJECT, RENEW, Acquired, SharePartition, Span,
)
from minikafka.protocol.errors import INVALID_RECORD_STATE, INVALID_REQUEST

LOCK = 30_000


def spans(*ranges, skip=()):
    return [Span(a, b, (a, b) in skip) for a, b in ranges]


def test_new_records_are_acquired_once_and_accept_moves_the_start():
    sp = SharePartition(0)
    assert sp.acquire("m1", spans((0, 4), (5, 9)), 500, LOCK, 0) == [Acquired(0, 9, 1)]
    assert sp.acquire("m2", spans((0, 4), (5, 9)), 500, LOCK, 0) == []
    assert sp.acknowledge("m1", 0, 4, [ACCEPT], 1, LOCK) == (0, None)
    assert (sp.start, sp.end) == (5, 10)
    assert sp.state_batches() == [(5, 9, AVAILABLE, 1)]


def test_only_the_owner_acknowledges_and_errors_apply_nothing():
    sp = SharePartition(0)
    sp.acquire("m1", spans((0, 9)), 500, LOCK, 0)
    assert sp.acknowledge("m2", 0, 0, [ACCEPT], 1, LOCK)[0] == INVALID_RECORD_STATE
    assert sp.acknowledge("m1", 5, 12, [ACCEPT], 1, LOCK) == (
        INVALID_REQUEST, "Batch record not found. The last offset in request is past acquired records.")
    assert sp.acknowledge("m1", 0, 2, [ACCEPT, REJECT], 1, LOCK)[0] == INVALID_REQUEST
    assert sp.acknowledge("m1", 0, 1, [9], 1, LOCK)[0] == INVALID_REQUEST
    assert sp.start == 0 and sp.acquired_by("m1") == 10


def test_release_redelivers_with_a_higher_count_and_the_limit_archives():
    sp = SharePartition(0, delivery_limit=2)
    sp.acquire("m1", spans((0, 1)), 500, LOCK, 0)
    assert sp.acknowledge("m1", 0, 1, [RELEASE, ACCEPT], 1, LOCK) == (0, None)
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("m2", spans((0, 1)), 500, LOCK, 2) == [Acquired(0, 0, 2)]
    assert sp.acknowledge("m2", 0, 0, [RELEASE], 3, LOCK) == (0, None)  # count reached the limit: archived
    assert sp.start == 2 and sp.end == 2 and not sp.records


def test_reject_and_gap_archive():
    sp = SharePartition(10)
    sp.acquire("m", spans((10, 13)), 500, LOCK, 0)
    assert sp.acknowledge("m", 10, 13, [REJECT, GAP, ACCEPT, RELEASE], 1, LOCK) == (0, None)
    assert (sp.start, sp.end) == (13, 14)
    assert sp.state_batches() == [(13, 13, AVAILABLE, 1)]


def test_lock_expiry_and_renew():
    sp = SharePartition(0)
    sp.acquire("m", spans((0, 3)), 500, 100, 0)
    assert sp.acknowledge("m", 2, 3, [RENEW], 50, 100) == (0, None)
    assert sp.next_deadline() == 100
    assert sp.expire_locks(100)
    assert [o for o, r in sp.records.items() if r.state == AVAILABLE] == [0, 1]
    assert sp.acquire("m2", spans((0, 3)), 500, 100, 120) == [Acquired(0, 1, 2)]


def test_member_release_and_max_records_keeps_whole_batches_unless_strict():
    sp = SharePartition(0)
    assert sp.acquire("m", spans((0, 4), (5, 9)), 3, LOCK, 0) == [Acquired(0, 4, 1)]
    assert sp.release_member("m")
    assert sp.acquire("m", spans((0, 4), (5, 9)), 3, LOCK, 0, strict=True) == [Acquired(0, 2, 2)]


def test_skipped_batches_are_archived_not_delivered():
    sp = SharePartition(0)
    got = sp.acquire("m", spans((0, 2), (3, 3), (4, 5), skip=[(3, 3)]), 500, LOCK, 0)
    assert got == [Acquired(0, 2, 1), Acquired(4, 5, 1)]
    sp.acknowledge("m", 0, 2, [ACCEPT], 1, LOCK)
    assert sp.start == 4


def test_window_bound_and_compaction_gaps():
    sp = SharePartition(0, max_in_flight=4)
    assert sp.acquire("m", spans((0, 9)), 500, LOCK, 0) == [Acquired(0, 3, 1)]
    assert not sp.can_acquire()
    sp.acknowledge("m", 0, 3, [ACCEPT], 1, LOCK)
    assert sp.can_acquire() and sp.start == 4
    assert sp.acquire("m", spans((100, 101)), 500, LOCK, 2) == [Acquired(100, 101, 1)]
    assert sp.start == 100


def test_persisted_state_round_trips():
    sp = SharePartition(5, [(5, 6, ACKNOWLEDGED, 1), (7, 7, ARCHIVED, 5), (8, 9, AVAILABLE, 2), (12, 12, ACKNOWLEDGED, 1)])
    assert sp.start == 8
    assert sp.state_batches() == [(8, 9, AVAILABLE, 2), (10, 11, AVAILABLE, 0), (12, 12, ACKNOWLEDGED, 1)]
    assert sp.acquire("m", spans((8, 12)), 500, LOCK, 0) == [Acquired(8, 9, 3), Acquired(10, 11, 1)]
    assert SharePartition(5, [(0, 9, ACKNOWLEDGED, 1)]).start == 10
    sp.move_start(11)
    assert (sp.start, sp.end) == (11, 13) and sp.acquired_by("m") == 1
