"""Three-node minikafka cluster vs three-node Apache Kafka cluster on one machine (issue 16).

    .venv/bin/python -m bench.cluster [--records 50000] [--kinds minikafka,kafka] [--warm-rounds 3]

Per cluster kind: start three nodes (KRaft combined mode, loopback), create a topic with 3 partitions,
replication factor 3 and min.insync.replicas=2, then
- produce throughput and delivery latency (p50/p99) with confluent-kafka, acks=all, idempotence on
  (one cold round right after start, then `--warm-rounds` on the same, long-running cluster: the
  warm figure is the median of those, so a cold JVM does not decide the comparison);
- failover: a producer sends one record every 5 ms to partition 0; the partition leader is killed
  with SIGKILL; failover time = the longest pause between two acknowledgements from the kill on (the
  producer retries on its own); every acknowledged record is then read back (none may be lost);
- replication cost: a 1-partition RF-3 topic takes --rep-mb MB of 1 KiB records (librdkafka defaults,
  acks=all); the leader's and each follower's CPU seconds (utime + stime, all threads) per GB;
- controller failover: the node that is the active controller (DescribeCluster) gets SIGKILL
  (after the partition leader killed above is back); the time from the kill until a CreateTopics
  is acknowledged;
- total RSS of the three processes (idle after the runs).
Both clusters run with the same fail-over timeouts (minikafka.testing_cluster.FAST_FAILOVER: broker
session 3 s, heartbeat 0.5 s, quorum fetch timeout 1 s, replica lag 3 s), so the failover time compares
the servers, not their defaults. Kafka runs with its start scripts' heap (1 GB) and JVM options.
Results go to stdout (BENCHMARKS.md's "Cluster" section quotes them).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPIC = "bench-cluster"
PAYLOAD = b"x" * 100


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return md.topics[topic].partitions[partition].leader


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC]
    fut.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # every partition has a leader
        if all(leader_of(bootstrap, TOPIC, p) >= 0 for p in range(3)):
            return
        time.sleep(0.1)
    raise RuntimeError("no leaders for the benchmark topic")


def produce_round(bootstrap: str, records: int) -> dict[str, float]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.num.messages": 10000})
    latencies: list[float] = []
    errors = [0]

    def done(err, _msg, t0=None):
        if err is not None:
            errors[0] += 1

    t_start = time.perf_counter()
    for i in range(records):
        t0 = time.perf_counter()
        while True:
            try:
                p.produce(TOPIC, PAYLOAD, partition=i % 3,
                          on_delivery=lambda err, msg, t0=t0: (latencies.append(time.perf_counter() - t0),
                                                               done(err, msg)))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - t_start
    return {"records_per_s": records / elapsed, "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000, "errors": errors[0]}


def failover(bootstrap: str, kill) -> dict[str, float]:
    """Kill the leader of partition 0 while producing; seconds from the kill to the next ack."""
    leader = leader_of(bootstrap, TOPIC, 0)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 0, "message.timeout.ms": 60000, "retry.backoff.ms": 50,
                  "topic.metadata.refresh.interval.ms": 1000})
    acked: list[tuple[float, int]] = []
    failed = [0]
    stop = threading.Event()
    sent = [0]

    def on_delivery(err, msg):
        if err is None:
            acked.append((time.monotonic(), int(msg.value())))
        else:
            failed[0] += 1

    def run():
        while not stop.is_set():
            p.produce(TOPIC, str(sent[0]).encode(), partition=0, on_delivery=on_delivery)
            sent[0] += 1
            p.poll(0.005)
    t = threading.Thread(target=run)
    t.start()
    time.sleep(2.0)
    killed_at = time.monotonic()
    kill(leader)
    deadline = killed_at + 60
    while time.monotonic() < deadline and not any(ts > killed_at + 0.001 for ts, _ in acked[-50:]):
        time.sleep(0.01)
    time.sleep(1.0)
    stop.set()
    t.join()
    p.flush(60)
    # the outage: the longest pause between acknowledgements from the kill on (acks of records sent
    # before the kill can still arrive right after it, so "first ack after the kill" would flatter)
    points = [killed_at] + sorted(ts for ts, _ in acked if ts > killed_at)
    outage = max((b - a for a, b in zip(points, points[1:])), default=float("nan"))
    acked_values = {v for _, v in acked}
    # every acked record is readable from the new leader
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time()}", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    seen: set[int] = set()
    end = time.monotonic() + 30
    while time.monotonic() < end and not acked_values <= seen:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                try:
                    seen.add(int(m.value()))
                except ValueError:
                    pass
    c.close()
    return {"failover_s": outage, "acked": len(acked_values),
            "lost": len(acked_values - seen), "failed": failed[0], "killed": leader}


def replication_cost(bootstrap: str, pids: dict[int, int], mb: float) -> dict[str, float]:
    """CPU s/GB of the leader and of the followers (mean of the two) of a 1-partition RF-3 topic."""
    from bench.brokers import cpu_seconds
    topic = f"bench-rep-{time.time_ns()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    deadline = time.monotonic() + 30
    while leader_of(bootstrap, topic, 0) < 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    leader = leader_of(bootstrap, topic, 0)
    payload = os.urandom(1024)
    n = int(mb * 1e6 / 1024)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(topic, payload)
    p.flush(30)
    before = {node: cpu_seconds(pid) for node, pid in pids.items()}
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(120):
        raise RuntimeError("replication round: records not acknowledged")
    seconds = time.perf_counter() - t0
    time.sleep(0.5)  # the followers' fetch of the last batch (acks=all: already there)
    gb = n * 1024 / 1e9
    cost = {node: (cpu_seconds(pid) - before[node]) / gb for node, pid in pids.items()}
    followers = [c for node, c in cost.items() if node != leader]
    return {"rep_mb_per_s": n * 1024 / 1e6 / seconds, "leader_cpu_s_per_gb": cost[leader],
            "follower_cpu_s_per_gb": statistics.mean(followers)}


def active_controller(bootstrap: str) -> int:
    """The quorum leader (kafka-metadata-quorum describe --status through a broker): Metadata and
    DescribeCluster name a random alive broker as "controller" on KRaft clusters, not the active one."""
    from scripts.apache_kafka import run_tool
    res = run_tool("kafka-metadata-quorum", ["--bootstrap-server", bootstrap.split(",")[0], "describe", "--status"],
                   timeout=90)
    for line in res.stdout.splitlines():
        if line.startswith("LeaderId:"):
            return int(line.split(":", 1)[1])
    raise RuntimeError(f"no LeaderId from kafka-metadata-quorum: {res.stdout[-500:]} {res.stderr[-500:]}")


def controller_failover(bootstrap: str, kill) -> dict[str, float]:
    """Kill the active controller; seconds until a CreateTopics is acknowledged. A fresh admin client
    per attempt: one that cached the killed node as its "controller" would measure its own metadata
    refresh, not the cluster."""
    controller = active_controller(bootstrap)
    killed_at = time.monotonic()
    kill(controller)
    k = 0
    while time.monotonic() < killed_at + 60:
        k += 1
        topic = f"after-controller-kill-{k}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            admin.create_topics([NewTopic(topic, 1, 2)], request_timeout=2.0,
                                operation_timeout=2.0)[topic].result(3)
            return {"controller_failover_s": time.monotonic() - killed_at, "controller_killed": controller}
        except Exception:  # noqa: BLE001 - not yet: no controller, timed out, or the old one's address
            time.sleep(0.05)
    raise TimeoutError("no CreateTopics acknowledged within 60 s of the controller's kill")


class MiniKafkaKind:
    name = "minikafka"

    def __enter__(self):
        from minikafka.testing import MiniKafkaCluster
        t0 = time.monotonic()
        self.cluster = MiniKafkaCluster(3, config={"min.insync.replicas": "2"},
                                        startup_timeout=60)
        self.ready_s = time.monotonic() - t0
        self.bootstrap = self.cluster.bootstrap_servers
        return self

    def kill(self, n: int) -> None:
        self.cluster.kill(n)

    def start_node(self, n: int) -> None:
        self.cluster.start_node(n)
        self.cluster.wait_ready(60)

    def pids(self) -> dict[int, int]:
        return {n: node.pid for n, node in self.cluster.nodes.items() if node.alive()}

    def rss_mb(self) -> float:
        from bench.common import rss_mb
        return sum(rss_mb(node.pid) for node in self.cluster.nodes.values() if node.alive())

    def __exit__(self, *exc):
        self.cluster.close()


class KafkaKind:
    name = "kafka"

    def __enter__(self):
        from scripts.apache_kafka import KafkaCluster
        t0 = time.monotonic()
        from minikafka.testing_cluster import FAST_FAILOVER
        # the same fail-over timeouts as MiniKafkaCluster's (Kafka has every one of these keys)
        from unittest import mock

        from bench.brokers import KAFKA_HEAP, KAFKA_JVM_OPTS
        from scripts import apache_kafka
        self.cluster = KafkaCluster(3, heap=KAFKA_HEAP, overrides={
            "min.insync.replicas": "2", "group.initial.rebalance.delay.ms": "0", **FAST_FAILOVER})
        self._jvm = mock.patch.object(apache_kafka, "SERVER_JVM_OPTS", ["-Xmx", *KAFKA_JVM_OPTS])
        self._jvm.start()  # the start scripts' options, for restarts too (stopped in __exit__)
        self.cluster.start()
        self.ready_s = time.monotonic() - t0
        self.bootstrap = self.cluster.bootstrap
        return self

    def kill(self, n: int) -> None:
        self.cluster.kill(n)

    def start_node(self, n: int) -> None:
        self.cluster.start_node(n)

    def pids(self) -> dict[int, int]:
        return {n: b.proc.pid for n, b in self.cluster.nodes.items() if b.alive()}

    def rss_mb(self) -> float:
        return self.cluster.rss_bytes() / 2**20

    def __exit__(self, *exc):
        try:
            self.cluster.stop()
            self.cluster.cleanup()
        finally:
            self._jvm.stop()


def run_kind(kind, records: int, warm_rounds: int, rep_mb: float) -> dict[str, float]:
    with kind as k:
        create_topic(k.bootstrap)
        cold = produce_round(k.bootstrap, records)
        warm = [produce_round(k.bootstrap, records) for _ in range(warm_rounds)]
        rep = replication_cost(k.bootstrap, k.pids(), rep_mb)
        rss = k.rss_mb()
        fo = failover(k.bootstrap, k.kill)
        k.start_node(fo["killed"])
        time.sleep(5)  # it rejoins the quorum and the ISRs
        cfo = controller_failover(k.bootstrap, k.kill)
        row = {"ready_s": k.ready_s, "cold_records_per_s": cold["records_per_s"], "cold_p99_ms": cold["p99_ms"],
               "warm_records_per_s": statistics.median(w["records_per_s"] for w in warm) if warm else float("nan"),
               "warm_p50_ms": statistics.median(w["p50_ms"] for w in warm) if warm else float("nan"),
               "warm_p99_ms": statistics.median(w["p99_ms"] for w in warm) if warm else float("nan"),
               "produce_errors": cold["errors"] + sum(w["errors"] for w in warm),
               "rss_mb_total": rss, **fo, **rep, **cfo}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--warm-rounds", type=int, default=3)
    ap.add_argument("--kinds", default="minikafka,kafka")
    ap.add_argument("--rep-mb", type=float, default=200, help="MB for the replication-cost round")
    args = ap.parse_args()
    kinds = {"minikafka": MiniKafkaKind, "kafka": KafkaKind}
    print(f"# machine: {os.cpu_count()} cores; records={args.records} x 100 B, 3 partitions, RF 3, "
          f"min.insync.replicas=2, acks=all, idempotent confluent-kafka producer")
    for name in args.kinds.split(","):
        row = run_kind(kinds[name](), args.records, args.warm_rounds, args.rep_mb)
        print(name, " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
              flush=True)


if __name__ == "__main__":
    main()
