"""Replica reassignment on a three-node cluster (KIP-455): Kafka's own `kafka-reassign-partitions`
moves a partition's replicas while an idempotent producer writes to it; the new replica catches up,
joins the ISR, the old one leaves and drops its log, nothing acknowledged is lost or duplicated. A
move to a dead broker stays pending (listed with its adding/removing replicas) across a controller
kill -9 and can be cancelled."""
from __future__ import annotations

import json
import sys
import threading
import time

import pytest
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
                                  CreateTopicsRequest, CreateTopicsResponse, DescribeLogDirsRequest,
                                  DescribeLogDirsResponse, ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse)

from tests.support.cluster_harness import Cluster, running
from tests.conftest import ROOT
from tests.support.helpers import RawClient, confluent_consume, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

CONFIG = {"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300",
          "replica.lag.time.max.ms": "2000",
          "replication.quota.window.num": "2"}  # throttle rates over 2 s, not 11 (a short test)
NO_REASSIGNMENT_IN_PROGRESS = 85
INVALID_REPLICA_ASSIGNMENT = 39


@pytest.fixture
def cluster(tmp_path):
    with running(Cluster(tmp_path, config=CONFIG)) as c:
        yield c


def _partition(c: Cluster, n: int, topic: str, p: int = 0) -> tuple[int, tuple, tuple]:
    """(leader, replicas, isr) as node n answers Metadata."""
    with RawClient(c.nodes[n].bootstrap, timeout=3) as cl:
        md = metadata_raw(cl, [topic], version=12)
    for t in md.topics:
        for part in t.partitions:
            if part.partition_index == p:
                return part.leader_id, tuple(part.replica_nodes), tuple(part.isr_nodes)
    return -1, (), ()  # not known to that node yet


def _create(c: Cluster, topic: str, replicas: list[int], via: int = 1, on: list[int] | None = None) -> None:
    """Create `topic` (one partition on `replicas`) through node `via`; wait until nodes `on` (all) see it."""
    C = CreateTopicsRequest.CreatableTopic
    with RawClient(c.nodes[via].bootstrap, timeout=40) as cl:
        resp = cl.request(CreateTopicsRequest(topics=[C(
            name=topic, num_partitions=-1, replication_factor=-1, configs=[],
            assignments=[C.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)])],
            timeout_ms=30000, validate_only=False), 7, CreateTopicsResponse)
    assert resp.topics[0].error_code == 0, resp
    wait_until(lambda: all(_partition(c, n, topic)[1] == tuple(replicas) for n in (on or c.ids)), timeout=15,
               what="the topic on every node")


def _alter(c: Cluster, n: int, topic: str, target: list[int] | None):
    R = AlterPartitionReassignmentsRequest.ReassignableTopic
    with RawClient(c.nodes[n].bootstrap, timeout=40) as cl:
        resp = cl.request(AlterPartitionReassignmentsRequest(timeout_ms=30000, allow_replication_factor_change=True,
                                                             topics=[R(name=topic, partitions=[R.ReassignablePartition(
                                                                 partition_index=0, replicas=target)])]),
                          1, AlterPartitionReassignmentsResponse)
    assert resp.error_code == 0, resp
    return resp.responses[0].partitions[0]


def _ongoing(c: Cluster, n: int) -> dict[tuple[str, int], tuple]:
    with RawClient(c.nodes[n].bootstrap, timeout=40) as cl:
        resp = cl.request(ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None), 0,
                          ListPartitionReassignmentsResponse)
    assert resp.error_code == 0, resp
    return {(t.name, p.partition_index): (tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
            for t in resp.topics for p in t.partitions}


def _has_log(c: Cluster, n: int, topic: str) -> bool:
    return (c.nodes[n].data_dir / f"{topic}-0").is_dir()


def _reassign_tool(c: Cluster, action: str, plan: dict, *extra: str) -> str:
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    lab.fetch()
    path = c.nodes[1].data_dir.parent / f"reassign-{action}.json"
    path.write_text(json.dumps(plan))
    res = lab.run_tool("kafka-reassign-partitions", ["--bootstrap-server", c.bootstrap, f"--{action}",
                                                     "--reassignment-json-file", str(path), *extra], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    return res.stdout


def test_kafka_reassign_partitions_moves_a_replica_under_load(cluster):
    _create(cluster, "mv", [1, 2])
    from confluent_kafka import Producer
    acked: list[int] = []
    errors: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 60000})

        def on_delivery(err, msg) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked.append(int(msg.value()))
        i = 0
        while not stop.is_set():
            producer.produce("mv", str(i).encode(), partition=0, on_delivery=on_delivery)
            producer.poll(0.002)
            i += 1
        assert producer.flush(60) == 0
    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_until(lambda: len(acked) > 500, timeout=30, what="records acknowledged before the move")
        plan = {"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [3, 2]}]}
        out = _reassign_tool(cluster, "execute", plan)
        assert "Successfully started partition reassignment" in out, out
        wait_until(lambda: "is completed" in _reassign_tool(cluster, "verify", plan), timeout=60,
                   interval=1.0, what="kafka-reassign-partitions --verify: completed")
        wait_until(lambda: len(acked) > 2000, timeout=30, what="records acknowledged after the move")
    finally:
        stop.set()
        writer.join(90)
    assert not errors, errors[:5]
    for n in cluster.ids:
        wait_until(lambda n=n: _partition(cluster, n, "mv")[1:] == ((3, 2), (3, 2)) or
                   _partition(cluster, n, "mv")[1:] == ((3, 2), (2, 3)), timeout=15, what=f"node {n}: replicas 3, 2")
    assert _partition(cluster, 2, "mv")[0] == 3  # the first target replica leads (the old leader was removed)
    wait_until(lambda: not _has_log(cluster, 1, "mv"), timeout=15, what="node 1 dropped its replica's log")
    assert _has_log(cluster, 3, "mv") and _ongoing(cluster, 1) == {}
    got = confluent_consume(cluster.bootstrap, "mv", {0: len(acked)}, timeout=60)[0]
    values = [int(m.value()) for m in got]
    assert values == sorted(values) and len(set(values)) == len(values), "duplicates or reordering"
    assert set(acked) <= set(values), f"lost {len(set(acked) - set(values))} acknowledged records"
    cluster.kill(2)  # the moved replica alone holds everything: it is a full copy
    wait_until(lambda: _partition(cluster, 1, "mv")[2] == (3,), timeout=15, what="ISR (3) without node 2")
    again = confluent_consume(cluster.bootstrap, "mv", {0: len(values)}, timeout=60)[0]
    assert [int(m.value()) for m in again] == values


def test_a_move_to_a_dead_broker_stays_pending_across_a_controller_kill_and_can_be_cancelled(cluster):
    """The added replica's node is down: the move is listed (Metadata shows every replica) and survives a
    kill -9 of the active controller; cancelled, the original replicas are back; started again, it
    completes once that node is back and has caught up."""
    controller, _ = cluster.agreed_leader(cluster.ids)
    dead = next(n for n in cluster.ids if n != controller)  # killing it keeps the quorum
    a, b = [n for n in cluster.ids if n != dead]
    _create(cluster, "pend", [a, b])
    cluster.kill(dead)
    assert _alter(cluster, a, "pend", [dead, b]).error_code == 0
    want = {("pend", 0): ((dead, b, a), (dead,), (a,))}
    assert _ongoing(cluster, b) == want
    assert _partition(cluster, b, "pend")[1] == (dead, b, a)  # Metadata lists every replica during the move
    cluster.kill(controller)
    cluster.restart(controller)
    cluster.agreed_leader([a, b], timeout=20)
    wait_until(lambda: _ongoing(cluster, a) == want, timeout=20, what="the move still listed")
    plan = {"version": 1, "partitions": [{"topic": "pend", "partition": 0, "replicas": [dead, b]}]}
    # throttles are left alone: clearing them asks every broker, and one is down (Kafka's tool times out too)
    out = _reassign_tool(cluster, "cancel", plan, "--preserve-throttles")
    assert "Successfully cancelled partition reassignment for: pend-0" in out, out
    assert _ongoing(cluster, a) == {}
    wait_until(lambda: set(_partition(cluster, a, "pend")[1]) == {a, b}, timeout=15, what="replicas back to a, b")
    assert _alter(cluster, a, "pend", None).error_code == NO_REASSIGNMENT_IN_PROGRESS
    assert _alter(cluster, a, "pend", [a, 9]).error_code == INVALID_REPLICA_ASSIGNMENT
    assert _alter(cluster, a, "pend", [dead, b]).error_code == 0
    cluster.restart(dead)
    wait_until(lambda: _ongoing(cluster, a) == {}, timeout=30, what="the move completed once the node was back")
    wait_until(lambda: _partition(cluster, dead, "pend")[1] == (dead, b), timeout=15, what="replicas dead, b")
    wait_until(lambda: not _has_log(cluster, a, "pend"), timeout=15, what="the removed replica dropped its log")


def _log_size(c: Cluster, n: int, topic: str) -> int:
    """Node n's bytes of topic-0 (DescribeLogDirs), 0 if it holds none."""
    T = DescribeLogDirsRequest.DescribableLogDirTopic
    with RawClient(c.nodes[n].bootstrap, timeout=10) as cl:
        resp = cl.request(DescribeLogDirsRequest(topics=[T(topic=topic, partitions=[0])]), 4, DescribeLogDirsResponse)
    return sum(p.partition_size for r in resp.results for t in r.topics for p in t.partitions)


def test_a_throttled_move_copies_at_the_throttle_rate(cluster):
    """`--throttle 1000000`: the new replica copies at about 1 MB/s (rate over 2 windows of 1 s), so 6 MB
    are not there after 2 s (unthrottled they take well under a second on loopback); `--verify` sees the
    move complete and removes the throttles."""
    _create(cluster, "thr", [1, 2])
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 1 << 20})
    value = b"v" * 10_000
    for _ in range(600):
        producer.produce("thr", value, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    full = _log_size(cluster, 1, "thr")
    assert full >= 6_000_000
    plan = {"version": 1, "partitions": [{"topic": "thr", "partition": 0, "replicas": [3, 2]}]}
    started = time.monotonic()
    out = _reassign_tool(cluster, "execute", plan, "--throttle", "1000000")
    assert "Warning: You must run --verify periodically, until the reassignment completes" in out, out
    time.sleep(max(0.0, started + 2.0 - time.monotonic()))
    copied = _log_size(cluster, 3, "thr")
    elapsed = time.monotonic() - started
    assert copied < 1_000_000 * (elapsed + 2), f"{copied} bytes copied in {elapsed:.1f} s at a 1 MB/s throttle"
    assert ("thr", 0) in _ongoing(cluster, 2)
    print(f"throttled move: {copied} of {full} bytes copied after {elapsed:.1f} s")
    done = {}

    def verified() -> bool:
        done["out"] = _reassign_tool(cluster, "verify", plan)
        return "is completed" in done["out"]
    wait_until(verified, timeout=60, interval=1.0, what="the throttled move completed")
    assert "Clearing topic-level throttles on topic thr" in done["out"], done["out"]
    assert _log_size(cluster, 3, "thr") == full
