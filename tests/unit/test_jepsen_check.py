"""The Jepsen-style checker (bench/jepsen_check.py) counts each kind of anomaly it is shown."""
from __future__ import annotations

from bench.jepsen_check import History, Txn, check


def history() -> History:
    h = History()
    h.sent_order["i"] = ["i:0", "i:1", "i:2", "i:3"]
    h.acked = {"i:0": 0, "i:1": 1, "i:2": 0}
    h.unsure = {"i:3"}
    h.txns = {1: Txn({"t1:0": 0, "t1:1": 1}, "committed"), 2: Txn({"t2:0": 0, "t2:1": 1}, "aborted"),
              3: Txn({"t3:0": 0, "t3:1": 1}, "unknown")}
    h.read = {0: ["i:0", "i:2"], 1: ["i:1"], 3: ["t1:0"], 4: ["t1:1"]}
    return h


def test_a_clean_history_is_ok():
    r = check(history())
    assert r.ok and r.counts()["acked"] == 3 and r.committed_txns == 1 and r.aborted_txns == 1


def test_an_unsure_value_may_be_present_or_not_and_an_unknown_txn_all_or_nothing():
    h = history()
    h.read[1].append("i:3")
    h.read[3].append("t3:0")
    h.read[4].append("t3:1")
    assert check(h).ok


def test_each_anomaly_is_counted():
    h = history()
    h.read[0] = ["i:2", "i:0", "i:0"]  # reordered + duplicated
    h.read[1] = []  # i:1 lost
    h.read[3] = ["t1:0", "t2:0", "t3:0", "ghost"]  # t1 torn (t1:1 missing: also lost), t2 visible, t3 torn, phantom
    h.read[4] = []
    r = check(h)
    assert (r.lost, r.duplicated, r.reordered, r.aborted_read, r.torn, r.phantom) == (2, 1, 1, 1, 2, 1)
    assert not r.ok and r.examples
