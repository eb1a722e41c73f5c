"""Jepsen-style run against a three-node minikafka cluster (issue 16): clients write while a nemesis kills
(-9) and pauses (SIGSTOP) nodes, one at a time; afterwards everything is read back and checked
(bench/jepsen_check.py: lost, duplicated, reordered, aborted-read, torn-transaction, divergent,
offset-mismatch and unexpected counts).

    .venv/bin/python -m bench.jepsen --seconds 300 --seed 7      # `make soak` runs a longer one
    .venv/bin/python -m bench.jepsen --seconds 60 --moves        # replicas reassigned meanwhile too
    .venv/bin/python -m bench.jepsen --seconds 60 --secured      # ACLs, SASL, an intruder on every node
    .venv/bin/python -m bench.jepsen --seconds 20 --json         # CI's budget (tests/integration/cluster/test_cluster_jepsen.py)
    .venv/bin/python -m bench.jepsen --against kafka --seconds 120  # the same run against three Apache Kafka nodes

Workload: an idempotent confluent-kafka producer (acks=all) writes "i:<seq>" round-robin to 3 partitions
of `jepsen` (replication factor 3, min.insync.replicas 2), one request in flight per connection by default
(`--writer-in-flight`, below); a transactional producer writes transactions
of 4 records over the 3 partitions of `jepsen-tx` and commits or aborts them (1 in 4 aborted on
purpose). With `--moves`, a mover reassigns the replicas of a random partition every 2-5 s (two of
the three brokers or all three, in a random order: a dropped replica's log is deleted, an added one is
copied from the leader from offset 0). Afterwards every partition is read from offset 0 to its end twice: read_committed and
read_uncommitted (two readers that must agree on every offset). Nemesis: every 1-3 s one random node is killed -9 (restarted 1-3 s later) or paused (resumed
1-3 s later); never two nodes at once, so a majority is always up.

Why the idempotent writer keeps one request in flight: librdkafka (2.x, still in its master) answers
OUT_OF_ORDER_SEQUENCE_NUMBER for a request that is not the head of its partition's in-flight requests (the
head failed, e.g. NOT_LEADER_OR_FOLLOWER during a leader change, so the next one skips a sequence — the
answer Apache Kafka gives too) by bumping the producer epoch and renumbering *every* queued message of
every partition, including messages of another partition whose request failed with a disconnect and
was in fact written: those are then written a second time. This is confluentinc/librdkafka#4953
(reported against Apache Kafka; the fix, #4972, is not merged). It is a client defect, so the checked
writer avoids it with max.in.flight.requests.per.connection=1 (no request can skip a sequence; an
out-of-order answer would then be fatal and fail the run). `--writer-in-flight 5` reproduces it.
"""
from __future__ import annotations

import argparse
import os
import json
import random
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.jepsen_check import Attempt, Read, Report, Txn, check  # noqa: E402

TOPIC, TXN_TOPIC, PARTITIONS = "jepsen", "jepsen-tx", 3


class Workload:
    def __init__(self, bootstrap: str, rng: random.Random, writer_in_flight: int = 1) -> None:
        self.bootstrap = bootstrap
        self.rng = rng
        self.writer_in_flight = writer_in_flight
        self.attempts: dict[str, Attempt] = {}  # id -> the attempt as it stands (outcome settled later)
        self.txns: dict[str, str] = {}  # txn id -> committed | aborted | unknown
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.errors: list[str] = []

    # -- idempotent producer ----------------------------------------------------------------------
    def idempotent(self) -> None:
        conf = {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                "linger.ms": 2, "message.timeout.ms": 30000, "retry.backoff.ms": 50,
                "topic.metadata.refresh.interval.ms": 1000,
                "max.in.flight.requests.per.connection": self.writer_in_flight}
        if os.environ.get("MINIKAFKA_JEPSEN_CLIENT_LOG"):  # librdkafka's idempotence decisions, for a post-mortem
            import logging
            logger = logging.getLogger("jepsen.idempotent")
            handler = logging.FileHandler(os.environ["MINIKAFKA_JEPSEN_CLIENT_LOG"])
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
            conf.update({"debug": "eos,protocol", "logger": logger})
        p = Producer(conf)

        def delivered(err, msg) -> None:
            value = msg.value().decode()
            with self.lock:
                a = self.attempts[value]
                # an error after retries is not proof that nothing was written: "unknown"
                self.attempts[value] = Attempt(a.id, a.topic, a.partition, "ok" if err is None else "unknown",
                                               offset=msg.offset() if err is None else None,
                                               producer=a.producer, seq=a.seq)
        seq = 0
        while not self.stop.is_set():
            value = f"i:{seq}"
            with self.lock:
                self.attempts[value] = Attempt(value, TOPIC, seq % PARTITIONS, "unknown", producer="i", seq=seq)
            try:
                p.produce(TOPIC, value.encode(), partition=seq % PARTITIONS, on_delivery=delivered)
            except BufferError:
                with self.lock:
                    del self.attempts[value]
                p.poll(0.05)
                continue
            except KafkaException as exc:  # a fatal idempotence error (e.g. a sequence desync): the run fails
                with self.lock:
                    del self.attempts[value]
                    self.errors.append(f"idempotent producer: {exc.args[0]}")
                break
            seq += 1
            p.poll(0.004)
        p.flush(60)

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
            txn = f"t{tid}"
            values = {f"{txn}:{i}": i % PARTITIONS for i in range(4)}
            with self.lock:
                self.txns[txn] = "unknown"
                for value, part in values.items():
                    self.attempts[value] = Attempt(value, TXN_TOPIC, part, "unknown", txn=txn)
            abort = self.rng.random() < 0.25
            try:
                p.begin_transaction()
                for value, part in values.items():
                    p.produce(TXN_TOPIC, value.encode(), partition=part)
                if abort:
                    p.abort_transaction(15)
                    self.txns[txn] = "aborted"
                else:
                    self._commit(p)
                    self.txns[txn] = "committed"
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(15)
                        self.txns[txn] = "aborted"
                    except KafkaException:
                        pass
                if not err.txn_requires_abort() or self.txns[txn] == "unknown":
                    # fatal, or the outcome cannot be settled: a new producer fences this one and
                    # aborts what it left open (its outcome stays "unknown": all or nothing)
                    try:
                        p.flush(1)
                    except Exception:
                        pass
                    p = self._txn_producer(tid)
            time.sleep(0.01)

    @staticmethod
    def _commit(p: Producer) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                p.commit_transaction(15)
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


class Mover:
    """Replica moves (KIP-455) beside the nemesis: every 2-5 s one partition of either topic gets a new
    replica set — two of the three brokers or all three, in a random order — so replicas are dropped
    (their log deleted) and added back (copied from the leader from offset 0) while nodes die."""

    def __init__(self, cluster, rng: random.Random, log) -> None:
        self.cluster = cluster
        self.rng = rng
        self.log = log
        self.stop = threading.Event()
        self.moves: list[str] = []

    def run(self) -> None:
        from kafka import TopicPartition as KTopicPartition
        from kafka.admin import KafkaAdminClient
        admin = None
        while not self.stop.wait(self.rng.uniform(2.0, 5.0)):
            topic, p = self.rng.choice((TOPIC, TXN_TOPIC)), self.rng.randrange(PARTITIONS)
            target = self.rng.sample(list(self.cluster.ids), self.rng.choice((2, 3)))
            try:
                if admin is None:
                    admin = KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap_servers.split(","),
                                             request_timeout_ms=5000, client_id="jepsen-mover")
                result = admin.alter_partition_reassignments({KTopicPartition(topic, p): target}, timeout_ms=5000)
                error = next(iter(result.values()), None) if result else None
                outcome = "ok" if error is None else getattr(error, "__name__", str(error))
            except Exception as exc:  # a node down or paused: the request's fate is unknown
                outcome = type(exc).__name__
                if admin is not None:
                    admin.close()
                    admin = None
            self.moves.append(f"{topic}-{p} -> {target}: {outcome}")
            self.log(f"mover: {topic}-{p} -> {target}: {outcome}")
        if admin is not None:
            admin.close()


def read_all(bootstrap: str, topic: str, read_committed: bool, timeout_s: float = 60.0) -> list[Read]:
    """Every partition of `topic` read from offset 0 to its end (one complete Read per partition)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"jepsen-read-{time.time()}",
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {}
        for p in range(PARTITIONS):
            _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p)
                                                                        for p in range(PARTITIONS)])}
            if all(positions[p] >= ends[p] for p in range(PARTITIONS)):
                break
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out[m.partition()].append((m.offset(), m.value().decode()))
        else:
            raise RuntimeError(f"could not read {topic} to its end offsets {ends} within {timeout_s}s")
        return [Read(topic, p, tuple(records), read_committed=read_committed) for p, records in out.items()]
    finally:
        c.close()


def run(cluster, seconds: float, seed: int, log=print, writer_in_flight: int = 1,
        moves: bool = False) -> tuple[Report, dict]:
    """One run on a running cluster (minikafka.testing.MiniKafkaCluster or alike: ids, kill, start_node,
    pause, resume, create_topic, bootstrap_servers); with `moves`, replicas are reassigned meanwhile. A
    cluster with `secure_addresses` (bench/jepsen_intruder.py's secured cluster) also gets the intruder.
    Returns the checker's report and run facts."""
    rng = random.Random(seed)
    cluster.create_topic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    cluster.create_topic(TXN_TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    w = Workload(cluster.bootstrap_servers, rng, writer_in_flight)
    nemesis = Nemesis(cluster, random.Random(seed + 1), log)
    mover = Mover(cluster, random.Random(seed + 2), log)
    intruder = None
    threads = [threading.Thread(target=w.idempotent, name="idempotent"),
               threading.Thread(target=w.transactional, name="transactional"),
               threading.Thread(target=nemesis.run, name="nemesis")]
    if moves:
        threads.append(threading.Thread(target=mover.run, name="mover"))
    if getattr(cluster, "secure_addresses", None):
        from bench.jepsen_intruder import Intruder
        intruder = Intruder(cluster.secure_addresses, cluster.controller_addresses, [TOPIC, TXN_TOPIC],
                            random.Random(seed + 3), log)
        threads.append(threading.Thread(target=intruder.run, name="intruder"))
    for t in threads:
        t.start()
    time.sleep(seconds)
    nemesis.stop.set()
    mover.stop.set()
    if intruder is not None:
        intruder.stop.set()
    for t in threads[2:]:
        t.join()
    for n in cluster.ids:  # heal
        cluster.resume(n)
        cluster.start_node(n)
    time.sleep(2.0)  # clients settle on the healed cluster before they stop
    w.stop.set()
    for t in threads[:2]:
        t.join(120)
    reads = [r for topic in (TOPIC, TXN_TOPIC) for committed in (True, False)
             for r in read_all(cluster.bootstrap_servers, topic, committed)]
    report = check(w.attempts.values(), [Txn(t, o) for t, o in w.txns.items()], reads)
    attempts = list(w.attempts.values())
    facts = {"seed": seed, "seconds": seconds, "faults": nemesis.faults, "moves": mover.moves,
             "client_errors": list(w.errors),
             "acked": sum(1 for a in attempts if a.txn is None and a.outcome == "ok"),
             "unknown": sum(1 for a in attempts if a.txn is None and a.outcome == "unknown"),
             **{f"txns_{o}": sum(1 for v in w.txns.values() if v == o) for o in ("committed", "aborted", "unknown")},
             "records_read": sum(len(r.records) for r in reads if r.read_committed)}
    if intruder is not None:
        from bench.jepsen_intruder import intruder_left_no_trace
        facts.update({"intrusions": intruder.attempts, "intrusions_refused": intruder.refused,
                      "breaches": list(intruder.breaches), "intrusions_unanswered": intruder.unexpected[:10],
                      "intruder_traces": intruder_left_no_trace(cluster.bootstrap_servers, [TOPIC, TXN_TOPIC])})
    return report, facts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--against", choices=("minikafka", "kafka"), default="minikafka",
                    help="kafka: the same run against a three-node Apache Kafka (scripts/apache_kafka.py)")
    ap.add_argument("--writer-in-flight", type=int, choices=range(1, 6), default=1,
                    help="the idempotent writer's max.in.flight.requests.per.connection (above 1: librdkafka#4953)")
    ap.add_argument("--moves", action="store_true",
                    help="also reassign replicas while the nemesis works (KIP-455: drop one, add it back)")
    ap.add_argument("--secured", action="store_true",
                    help="minikafka: SASL listeners and ACLs, and an intruder attempting refused operations "
                         "on every node meanwhile (bench/jepsen_intruder.py)")
    ap.add_argument("--data-dir", default=None,
                    help="minikafka: keep the nodes' data and logs here (a post-mortem of a failed run)")
    args = ap.parse_args()
    say = lambda s: print(s, file=sys.stderr)  # noqa: E731
    if args.against == "kafka":
        from scripts.apache_kafka import KafkaCluster
        cluster = KafkaCluster(3, heap="384m", overrides={"min.insync.replicas": "2"}).start()
        try:
            report, facts = run(cluster, args.seconds, args.seed, log=say,
                                writer_in_flight=args.writer_in_flight, moves=args.moves)
        finally:
            cluster.stop()
            cluster.cleanup()
    else:
        from minikafka.testing import MiniKafkaCluster
        if args.secured:
            from bench.jepsen_intruder import secured_cluster
            made = secured_cluster({"min.insync.replicas": "2"}, data_dir=args.data_dir)
        else:
            made = MiniKafkaCluster(3, config={"min.insync.replicas": "2"}, startup_timeout=60,
                                    data_dir=args.data_dir)
        with made as cluster:
            report, facts = run(cluster, args.seconds, args.seed, log=say,
                                writer_in_flight=args.writer_in_flight, moves=args.moves)
            if args.data_dir:  # the nodes' logs next to their data
                import shutil
                for n, node in cluster.nodes.items():
                    if node.log_path.exists():
                        shutil.copy(node.log_path, Path(args.data_dir) / f"node{n}.log")
    ok = report.ok and not facts["client_errors"] and not facts.get("breaches") and not facts.get("intruder_traces")
    result = {**facts, **report.counts(), "ok": ok, "examples": dict(report.examples)}
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
