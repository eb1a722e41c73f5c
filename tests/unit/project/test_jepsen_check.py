"""bench/jepsen_check.py: each anomaly is counted, and only it, on small hand-made histories."""
from __future__ import annotations

import pytest

from bench.jepsen_check import Attempt, Read, Txn, check


def ok(i: int, offset: int, *, partition: int = 0, acks: int = -1, producer: str | None = "p1",
       txn: str | None = None) -> Attempt:
    return Attempt(f"id-{i}", "t", partition, "ok", acks=acks, offset=offset, producer=producer, seq=i, txn=txn)


def read(*ids_at: tuple[int, int], partition: int = 0, committed: bool = True, complete: bool = True) -> Read:
    return Read("t", partition, tuple((off, f"id-{i}") for off, i in ids_at), read_committed=committed,
                complete=complete)


def only(report, **expected: int) -> None:
    counts = report.counts()
    assert {k: v for k, v in counts.items() if v} == expected, str(report)


def test_clean_history() -> None:
    attempts = [ok(0, 0), ok(1, 1), ok(2, 2)]
    report = check(attempts, [], [read((0, 0), (1, 1), (2, 2)), read((1, 1), complete=False)])
    assert report.ok
    only(report)
    assert str(report) == "history ok"


def test_lost_acknowledged_records_only() -> None:
    attempts = [ok(0, 0), ok(1, 1), ok(2, 2, acks=1),
                Attempt("id-3", "t", 0, "unknown", producer="p1", seq=3),
                Attempt("id-4", "t", 0, "fail", producer="p1", seq=4)]
    report = check(attempts, [], [read((0, 0))])
    only(report, lost=1)  # id-1: acks=all and acknowledged; acks=1, unknown and failed ones may go
    assert report.examples["lost"] == ["id-1"]
    assert not report.ok


def test_incomplete_reads_prove_nothing_lost() -> None:
    report = check([ok(0, 0), ok(1, 0, partition=1)], [], [read((0, 0), complete=False), read((0, 1), partition=1)])
    only(report, unchecked_partitions=1)
    assert report.ok


def test_duplicates_and_offset_mismatch() -> None:
    # id-1 written twice (a retry that was not deduplicated): offsets 1 and 2
    report = check([ok(0, 0), ok(1, 1)], [], [read((0, 0), (1, 1), (2, 1))])
    only(report, duplicated=1, offset_mismatch=1)
    # re-reading the same offsets is not a duplicate
    assert check([ok(0, 0)], [], [read((0, 0)), read((0, 0))]).ok


def test_divergent_reads() -> None:
    # one reader saw id-1 at offset 1 before a truncation; after it, offset 1 holds id-2
    attempts = [ok(0, 0), Attempt("id-1", "t", 0, "unknown", producer="p1", seq=1), ok(2, 1)]
    report = check(attempts, [], [read((0, 0), (1, 1), complete=False), read((0, 0), (1, 2))])
    only(report, divergent=1)


def test_reordering_per_producer() -> None:
    attempts = [ok(0, 0), ok(1, 2), ok(2, 1), Attempt("id-9", "t", 0, "ok", offset=3, producer=None)]
    report = check(attempts, [], [read((0, 0), (1, 2), (2, 1), (3, 9)), read((1, 2), (2, 1), complete=False)])
    only(report, reordered=1)
    assert report.examples["reordered"][0][0] == "id-1"
    # different producers interleave freely
    other = [ok(0, 0), Attempt("id-1", "t", 0, "ok", offset=1, producer="p2", seq=0)]
    assert check(other, [], [read((0, 0), (1, 1))]).ok


def test_unexpected_ids() -> None:
    only(check([ok(0, 0)], [], [read((0, 0), (1, 77))]), unexpected=1)


def test_aborted_reads_only_count_for_read_committed() -> None:
    attempts = [ok(0, 0, txn="a"), ok(1, 1, txn="a"), ok(2, 3, txn="c")]
    txns = [Txn("a", "aborted"), Txn("c", "committed")]
    report = check(attempts, txns, [read((0, 0), (3, 2))])
    only(report, aborted_read=1)
    assert check(attempts, txns, [read((0, 0), (1, 1), (3, 2), committed=False)]).ok


def test_committed_transaction_records_are_never_lost_or_torn() -> None:
    attempts = [Attempt(f"id-{i}", "t", i % 2, "ok", offset=i // 2, producer="tx", seq=i, txn="c")
                for i in range(4)]
    txns = [Txn("c", "committed")]
    whole = [read((0, 0), (1, 2), partition=0), read((0, 1), (1, 3), partition=1)]
    assert check(attempts, txns, whole).ok
    torn = [read((0, 0), partition=0), read((0, 1), (1, 3), partition=1)]
    only(check(attempts, txns, torn), lost=1, torn_transactions=1)
    # the same for an outcome the client never learned: all or nothing
    unknown = [Txn("c", "unknown")]
    only(check(attempts, unknown, torn), torn_transactions=1)
    assert check(attempts, unknown, [read(partition=0), read(partition=1)]).ok


def test_attempt_ids_must_be_unique() -> None:
    with pytest.raises(ValueError):
        check([ok(0, 0), ok(0, 1)], [], [])
