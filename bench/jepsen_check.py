"""The Jepsen-style checker of a cluster run (issue 16): what clients were told against what the log holds.

Input, recorded by the workload (bench/jepsen.py):
- `acked`: values an idempotent producer was told were written (acks=all), with their partition;
  `unsure`: values whose outcome the producer never learned (timed out / failed): may or may not be there;
- per transaction: its values (partition of each) and its outcome: "committed" (commit_transaction
  returned), "aborted" (abort_transaction returned) or "unknown" (the producer died or erred in between);
- `read`: per partition, the values a read_committed consumer read from offset 0 after the run, in
  offset order.
Values are strings "<producer>:<seq>" (idempotent) or "t<txn>:<i>" (transactional).

Counts (every one must be 0):
- lost: acked values, or values of committed transactions, that are not read;
- duplicated: values read more than once (idempotence / exactly-once broken);
- reordered: per partition, an idempotent producer's values read out of its send order;
- aborted_read: values of aborted transactions that are read (read_committed must hide them);
- torn: transactions of which some but not all values are read (atomicity broken; includes "unknown");
- phantom: values read that no producer ever sent.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Txn:
    values: dict[str, int]  # value -> partition
    outcome: str = "unknown"  # committed | aborted | unknown


@dataclass
class History:
    acked: dict[str, int] = field(default_factory=dict)  # value -> partition
    unsure: set[str] = field(default_factory=set)
    sent_order: dict[str, list[str]] = field(default_factory=dict)  # producer -> values in send order
    txns: dict[int, Txn] = field(default_factory=dict)
    read: dict[int, list[str]] = field(default_factory=dict)  # partition -> values in offset order


@dataclass
class Report:
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    aborted_read: int = 0
    torn: int = 0
    phantom: int = 0
    acked: int = 0
    committed_txns: int = 0
    aborted_txns: int = 0
    unknown_txns: int = 0
    read: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.aborted_read or self.torn or self.phantom)

    def counts(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("lost", "duplicated", "reordered", "aborted_read", "torn", "phantom",
                                              "acked", "committed_txns", "aborted_txns", "unknown_txns", "read")}


def check(h: History, max_examples: int = 10) -> Report:
    r = Report(acked=len(h.acked))
    seen = Counter(v for values in h.read.values() for v in values)
    where = {v: p for p, values in h.read.items() for v in values}
    r.read = sum(seen.values())

    def example(text: str) -> None:
        if len(r.examples) < max_examples:
            r.examples.append(text)

    for v, n in seen.items():
        if n > 1:
            r.duplicated += n - 1
            example(f"duplicated {v} x{n}")
    for v, p in h.acked.items():
        if v not in seen:
            r.lost += 1
            example(f"lost acked {v} (partition {p})")
        elif where[v] != p:
            r.phantom += 1
            example(f"{v} acked on partition {p} but read on {where[v]}")
    txn_values = {}
    for tid, txn in h.txns.items():
        txn_values.update({v: tid for v in txn.values})
        present = [v for v in txn.values if v in seen]
        if txn.outcome == "committed":
            r.committed_txns += 1
            missing = len(txn.values) - len(present)
            r.lost += missing
            if missing:
                example(f"committed t{tid} missing {missing} of {len(txn.values)}")
            if present and missing:
                r.torn += 1
        elif txn.outcome == "aborted":
            r.aborted_txns += 1
            r.aborted_read += len(present)
            if present:
                example(f"aborted t{tid} visible: {present[:3]}")
        else:
            r.unknown_txns += 1
            if present and len(present) != len(txn.values):
                r.torn += 1
                example(f"unknown-outcome t{tid} partly visible ({len(present)} of {len(txn.values)})")
    sent = {v for values in h.sent_order.values() for v in values} | set(h.acked) | h.unsure
    for v in seen:
        if v not in sent and v not in txn_values:
            r.phantom += 1
            example(f"phantom {v}")
    for producer, order in h.sent_order.items():
        rank = {v: i for i, v in enumerate(order)}
        for p, values in h.read.items():
            last, counted = -1, set()
            for v in values:
                i = rank.get(v)
                if i is None or v in counted:  # a duplicate is counted as such, not again here
                    continue
                counted.add(v)
                if i < last:
                    r.reordered += 1
                    example(f"reordered {v} on partition {p} (producer {producer})")
                last = max(last, i)
    return r
