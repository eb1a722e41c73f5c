"""A Jepsen-style checker for Kafka histories: pure (no I/O, no clients), driven by a soak that kills and
pauses brokers while producers, transactions and consumers run, then reads every partition back.

Input, three lists:
- `Attempt`: one produced record (its value is a unique `id`): topic, partition, the producer that
  sent it and its send order there (`seq`, for ordering), `acks`, the outcome the client saw
  ("ok" with the acknowledged `offset`, "fail" = a definite error, "unknown" = timeout or
  indeterminate), and the transaction it belongs to (`txn`, None outside transactions).
- `Txn`: a transaction's outcome as the client saw it: "committed", "aborted" or "unknown".
- `Read`: what one consumer read of one partition, as (offset, id) in the order received, with its
  isolation level and whether it covered the partition from its log start to its end (`complete`;
  only complete reads can prove that something is missing).

Output, a `Report` of counts (with a few example ids each):
- lost: records that must be there, absent from a complete read of their partition: acknowledged
  acks=all records outside transactions, and every record of a committed transaction.
- duplicated: extra positions of an id read at more than one (topic, partition, offset).
- reordered: records read after a record of the same producer and partition that was sent later.
- aborted_read: records of aborted transactions seen by a read_committed reader.
- torn_transactions: committed (or unknown) transactions of which a complete read_committed read
  of a partition shows some records but not all.
- divergent: offsets two readers saw with different ids (the log changed under a reader: it read past
  what was committed, e.g. beyond the high watermark, and the tail was truncated).
- offset_mismatch: acknowledged records read at another offset than the one acknowledged.
- unexpected: ids read that nobody attempted.
`Report.ok` is true when every count is zero.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Literal

Outcome = Literal["ok", "fail", "unknown"]
TxnOutcome = Literal["committed", "aborted", "unknown"]
ACKS_ALL = -1
EXAMPLES = 5

TP = tuple[str, int]


@dataclass(frozen=True)
class Attempt:
    id: str
    topic: str
    partition: int
    outcome: Outcome
    acks: int = ACKS_ALL
    offset: int | None = None  # the acknowledged offset ("ok")
    producer: str | None = None  # None: no ordering expectation
    seq: int = 0  # send order within the producer
    txn: str | None = None


@dataclass(frozen=True)
class Txn:
    id: str
    outcome: TxnOutcome


@dataclass(frozen=True)
class Read:
    topic: str
    partition: int
    records: tuple[tuple[int, str], ...]  # (offset, id) in the order received
    read_committed: bool = True
    complete: bool = True  # from the log start to the end of the partition


@dataclass
class Report:
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    aborted_read: int = 0
    torn_transactions: int = 0
    divergent: int = 0
    offset_mismatch: int = 0
    unexpected: int = 0
    unchecked_partitions: int = 0  # partitions with attempts but no complete read (nothing provable lost)
    examples: dict[str, list] = field(default_factory=lambda: defaultdict(list))

    COUNTS = ("lost", "duplicated", "reordered", "aborted_read", "torn_transactions", "divergent",
              "offset_mismatch", "unexpected")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.COUNTS)

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in (*self.COUNTS, "unchecked_partitions")}

    def _note(self, what: str, example: object, n: int = 1) -> None:
        setattr(self, what, getattr(self, what) + n)
        if len(self.examples[what]) < EXAMPLES:
            self.examples[what].append(example)

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.counts().items() if v]
        text = "history ok" if self.ok else "history NOT ok: " + ", ".join(parts)
        bad = {k: v for k, v in self.examples.items() if v}
        return text + (f" examples={dict(bad)}" if bad else "")


def check(attempts: Iterable[Attempt], txns: Iterable[Txn], reads: Iterable[Read]) -> Report:
    """Check a history; see the module docstring for what each count means."""
    attempts = list(attempts)
    reads = list(reads)
    report = Report()
    by_id: dict[str, Attempt] = {}
    for a in attempts:
        if a.id in by_id:
            raise ValueError(f"attempt id {a.id!r} is not unique")
        by_id[a.id] = a
    txn_outcome = {t.id: t.outcome for t in txns}

    # every position each id was read at, and every id each position was read with
    positions: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    at: dict[tuple[str, int, int], set[str]] = defaultdict(set)
    for r in reads:
        for offset, rid in r.records:
            positions[rid].add((r.topic, r.partition, offset))
            at[(r.topic, r.partition, offset)].add(rid)

    for rid in sorted(positions):
        if rid not in by_id:
            report._note("unexpected", rid)
        if len(positions[rid]) > 1:
            report._note("duplicated", (rid, sorted(positions[rid])), len(positions[rid]) - 1)
        a = by_id.get(rid)
        if a is not None and a.outcome == "ok" and a.offset is not None:
            if any(pos != (a.topic, a.partition, a.offset) for pos in positions[rid]):
                report._note("offset_mismatch", (rid, a.offset, sorted(positions[rid])))
    for pos in sorted(at):
        if len(at[pos]) > 1:
            report._note("divergent", (pos, sorted(at[pos])))

    # what the complete reads of each partition saw (read_committed ones separately)
    seen_complete: dict[TP, set[str]] = defaultdict(set)
    seen_committed: dict[TP, set[str]] = {}
    for r in reads:
        tp = (r.topic, r.partition)
        ids = {rid for _offset, rid in r.records}
        if r.read_committed:
            for rid in sorted(ids):
                a = by_id.get(rid)
                if a is not None and a.txn is not None and txn_outcome.get(a.txn) == "aborted":
                    report._note("aborted_read", rid)
        if r.complete:
            seen_complete[tp] |= ids
            if r.read_committed:
                seen_committed[tp] = seen_committed.get(tp, set()) | ids

    # lost: what must be in a complete read of its partition
    unchecked: set[TP] = set()
    for a in attempts:
        tp = (a.topic, a.partition)
        must = (a.txn is None and a.outcome == "ok" and a.acks == ACKS_ALL) or (
            a.txn is not None and txn_outcome.get(a.txn) == "committed")
        if not must:
            continue
        if tp not in seen_complete:
            unchecked.add(tp)
            continue
        if a.id not in seen_complete[tp]:
            report._note("lost", a.id)
    report.unchecked_partitions = len(unchecked)

    # torn transactions: partly visible to a complete read_committed read of a partition
    members: dict[str, dict[TP, list[str]]] = defaultdict(lambda: defaultdict(list))
    for a in attempts:
        if a.txn is not None:
            members[a.txn][(a.topic, a.partition)].append(a.id)
    for txn_id in sorted(members):
        if txn_outcome.get(txn_id) == "aborted":
            continue  # any visible record of it is an aborted_read already
        for tp, ids in sorted(members[txn_id].items()):
            seen = seen_committed.get(tp)
            if seen is None:
                continue
            visible = sum(1 for i in ids if i in seen)
            if 0 < visible < len(ids):
                report._note("torn_transactions", (txn_id, tp, visible, len(ids)))
                break

    # reordering: per read, per (producer, partition), in offset order the send order never goes back
    # (an id is counted once however many reads show it out of order)
    reordered: dict[str, tuple] = {}
    for r in reads:
        high: dict[str, int] = {}
        for _offset, rid in sorted(r.records):
            a = by_id.get(rid)
            if a is None or a.producer is None:
                continue
            top = high.get(a.producer)
            if top is not None and a.seq < top:
                reordered.setdefault(rid, (rid, a.producer, a.seq, top))
            else:
                high[a.producer] = a.seq
    for rid in sorted(reordered):
        report._note("reordered", reordered[rid])
    return report


__all__ = ["ACKS_ALL", "Attempt", "Read", "Report", "Txn", "check"]
