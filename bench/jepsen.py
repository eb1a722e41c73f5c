"""Jepsen-style run against a three-node minikafka cluster (issue 16): clients write while a nemesis kills
(-9) and pauses (SIGSTOP) nodes, one at a time; afterwards everything is read back and checked
(bench/jepsen_check.py: lost, duplicated, reordered, aborted-read, torn-transaction and phantom counts).

    .venv/bin/python -m bench.jepsen --seconds 300 --seed 7      # `make soak` runs a longer one
    .venv/bin/python -m bench.jepsen --seconds 20 --json         # CI's budget (tests/integration/test_cluster_jepsen.py)

Workload: an idempotent confluent-kafka producer (acks=all) writes "i:<seq>" round-robin to 3 partitions
of `jepsen` (replication factor 3, min.insync.replicas 2); a transactional producer writes transactions
of 4 records over the 3 partitions of `jepsen-tx` and commits or aborts them (1 in 4 aborted on
purpose). Nemesis: every 1-3 s one random node is killed -9 (restarted 1-3 s later) or paused (resumed
1-3 s later); never two nodes at once, so a majority is always up.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.jepsen_check import History, Report, Txn, check  # noqa: E402

TOPIC, TXN_TOPIC, PARTITIONS = "jepsen", "jepsen-tx", 3


class Workload:
    def __init__(self, bootstrap: str, history: History, rng: random.Random) -> None:
        self.bootstrap = bootstrap
        self.h = history
        self.rng = rng
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.errors: list[str] = []

    # -- idempotent producer ----------------------------------------------------------------------
    def idempotent(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 2, "message.timeout.ms": 30000, "retry.backoff.ms": 50,
                      "topic.metadata.refresh.interval.ms": 1000})
        order = self.h.sent_order.setdefault("i", [])

        def delivered(err, msg) -> None:
            value = msg.value().decode()
            with self.lock:
                if err is None:
                    self.h.acked[value] = msg.partition()
                else:
                    self.h.unsure.add(value)
        seq = 0
        while not self.stop.is_set():
            value = f"i:{seq}"
            try:
                p.produce(TOPIC, value.encode(), partition=seq % PARTITIONS, on_delivery=delivered)
            except BufferError:
                p.poll(0.05)
                continue
            with self.lock:
                order.append(value)
            seq += 1
            p.poll(0.004)
        p.flush(60)
        with self.lock:  # never delivered either way: unsure
            self.h.unsure.update(v for v in order if v not in self.h.acked)

    # -- transactional producer -------------------------------------------------------------------
    def _txn_producer(self, n: int) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "jepsen-tx",
                      "transaction.timeout.ms": 15000, "message.timeout.ms": 15000,
                      "topic.metadata.refresh.interval.ms": 1000})
        deadline = time.monotonic() + 60
        while True:
            try:
                p.init_transactions(15)
                return p
            except KafkaException as exc:
                if time.monotonic() > deadline or exc.args[0].fatal():
                    raise
                time.sleep(0.2)

    def transactional(self) -> None:
        p = self._txn_producer(0)
        tid = 0
        while not self.stop.is_set():
            tid += 1
            txn = Txn({f"t{tid}:{i}": i % PARTITIONS for i in range(4)})
            with self.lock:
                self.h.txns[tid] = txn
            abort = self.rng.random() < 0.25
            try:
                p.begin_transaction()
                for value, part in txn.values.items():
                    p.produce(TXN_TOPIC, value.encode(), partition=part)
                if abort:
                    p.abort_transaction(15)
                    txn.outcome = "aborted"
                else:
                    self._commit(p, txn)
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(15)
                        txn.outcome = "aborted"
                    except KafkaException:
                        pass
                if not err.txn_requires_abort() or txn.outcome == "unknown":
                    # fatal, or the outcome cannot be settled: a new producer fences this one and
                    # aborts what it left open (its outcome stays "unknown": all or nothing)
                    try:
                        p.flush(1)
                    except Exception:
                        pass
                    p = self._txn_producer(tid)
            time.sleep(0.01)

    @staticmethod
    def _commit(p: Producer, txn: Txn) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                p.commit_transaction(15)
                txn.outcome = "committed"
                return
            except KafkaException as exc:
                if exc.args[0].retriable() and time.monotonic() < deadline:
                    continue  # Kafka's contract: a retriable commit error may be retried
                raise


class Nemesis:
    def __init__(self, cluster, rng: random.Random, log) -> None:
        self.cluster = cluster
        self.rng = rng
        self.log = log
        self.stop = threading.Event()
        self.faults: list[str] = []

    def run(self) -> None:
        while not self.stop.wait(self.rng.uniform(1.0, 3.0)):
            n = self.rng.choice(self.cluster.ids)
            down = self.rng.uniform(1.0, 3.0)
            if self.rng.random() < 0.5:
                self.faults.append(f"kill {n}")
                self.log(f"nemesis: kill -9 node {n} for {down:.1f}s")
                self.cluster.kill(n)
                self.stop.wait(down)
                self.cluster.start_node(n)
            else:
                self.faults.append(f"pause {n}")
                self.log(f"nemesis: pause node {n} for {down:.1f}s")
                self.cluster.pause(n)
                self.stop.wait(down)
                self.cluster.resume(n)


def read_all(bootstrap: str, topic: str, timeout_s: float = 60.0) -> dict[int, list[str]]:
    """Every committed value of `topic`, per partition in offset order (read_committed, from 0)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"jepsen-read-{time.time()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        ends = {}
        for p in range(PARTITIONS):
            _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p)
                                                                        for p in range(PARTITIONS)])}
            if all(positions[p] >= ends[p] for p in range(PARTITIONS)):
                break
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out[m.partition()].append(m.value().decode())
        else:
            raise RuntimeError(f"could not read {topic} to its end offsets {ends} within {timeout_s}s")
        return out
    finally:
        c.close()


def run(cluster, seconds: float, seed: int, log=print) -> tuple[Report, dict]:
    """One run on a running cluster (minikafka.testing.MiniKafkaCluster or alike: ids, kill, start_node,
    pause, resume, create_topic, bootstrap_servers). Returns the checker's report and run facts."""
    rng = random.Random(seed)
    cluster.create_topic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    cluster.create_topic(TXN_TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    h = History()
    w = Workload(cluster.bootstrap_servers, h, rng)
    nemesis = Nemesis(cluster, random.Random(seed + 1), log)
    threads = [threading.Thread(target=w.idempotent, name="idempotent"),
               threading.Thread(target=w.transactional, name="transactional"),
               threading.Thread(target=nemesis.run, name="nemesis")]
    for t in threads:
        t.start()
    time.sleep(seconds)
    nemesis.stop.set()
    threads[2].join()
    for n in cluster.ids:  # heal
        cluster.resume(n)
        cluster.start_node(n)
    time.sleep(2.0)  # clients settle on the healed cluster before they stop
    w.stop.set()
    for t in threads[:2]:
        t.join(120)
    h.read = read_all(cluster.bootstrap_servers, TOPIC)
    for p, values in read_all(cluster.bootstrap_servers, TXN_TOPIC).items():
        h.read.setdefault(p + PARTITIONS, []).extend(values)  # distinct keys: txn partitions
    report = check(h)
    return report, {"seed": seed, "seconds": seconds, "faults": nemesis.faults}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from minikafka.testing import MiniKafkaCluster
    with MiniKafkaCluster(3, config={"min.insync.replicas": "2"}, startup_timeout=60) as cluster:
        report, facts = run(cluster, args.seconds, args.seed, log=lambda s: print(s, file=sys.stderr))
    result = {**facts, **report.counts(), "ok": report.ok, "examples": report.examples}
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
