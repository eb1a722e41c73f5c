"""Cluster metadata between three `minikafka serve` processes (issue 16): topics created through the
active controller with replicas placed over the brokers, every node describing the same leaders,
replicas and ISR (raw Metadata, confluent-kafka, Kafka's `kafka-topics --describe`); a killed broker
fenced after broker.session.timeout.ms with its leaderships moved inside the ISR; a new controller
after the old one is killed carrying on; a paused (partitioned) old controller unable to commit."""
from __future__ import annotations

import json
import re
import sys
import time
import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from minikafka.testing import minikafka_command, subprocess_env
from tests.support.cluster_harness import Cluster, brokers, running
from tests.conftest import ROOT
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

SESSION_MS = 1500
CONFIG = {"broker.session.timeout.ms": str(SESSION_MS), "broker.heartbeat.interval.ms": "300"}


@pytest.fixture
def cluster(tmp_path):
    with running(Cluster(tmp_path, config=CONFIG)) as c:
        yield c


def partitions(c: Cluster, n: int, topic: str) -> dict[int, tuple]:
    """partition -> (leader, leader epoch, replicas, isr, offline) as node n answers Metadata."""
    with RawClient(c.nodes[n].bootstrap, timeout=3) as cl:
        md = metadata_raw(cl, [topic], version=12)
    out = {}
    for t in md.topics:
        for p in t.partitions:
            out[p.partition_index] = (p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes),
                                      tuple(p.offline_replicas))
    return out


def create(bootstrap: str, name: str, partitions_: int, rf: int) -> CreateTopicsResponse:
    with RawClient(bootstrap, timeout=40) as cl:
        return cl.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions_, replication_factor=rf, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False), 7, CreateTopicsResponse).topics[0]


def test_rf3_topic_is_described_alike_on_every_node(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.nodes[1].bootstrap})
    admin.create_topics([NewTopic("orders", 3, 3)])["orders"].result(20)
    views = wait_until(lambda: (lambda vs: vs if vs[0] == vs[1] == vs[2] and len(vs[0]) == 3 else None)(
        [partitions(cluster, n, "orders") for n in cluster.ids]), what="every node knows the topic alike")
    for leader, epoch, replicas, isr, offline in views[0].values():
        assert sorted(replicas) == [1, 2, 3] and set(isr) == {1, 2, 3} and leader == replicas[0] and not offline
    assert sorted(v[0] for v in views[0].values()) == [1, 2, 3]  # leaders spread over the brokers
    for node in cluster.nodes.values():  # every replica has its log, with the topic's id
        assert all((node.data_dir / f"orders-{p}" / "partition.metadata").exists() for p in range(3))
    # a stock client sees the replicas and ISR from any node
    md = AdminClient({"bootstrap.servers": cluster.nodes[3].bootstrap}).list_topics("orders", timeout=10)
    assert {p.id: (p.leader, tuple(p.replicas)) for p in md.topics["orders"].partitions.values()} == \
        {p: (v[0], v[2]) for p, v in views[0].items()}
    assert sorted(md.brokers) == [1, 2, 3]
    # minikafka's own CLI shows them too
    import subprocess
    out = subprocess.run([*minikafka_command(), "topics", "describe", "orders",
                          "--bootstrap-server", cluster.nodes[1].bootstrap], capture_output=True, text=True,
                         timeout=60, cwd=str(ROOT), env=subprocess_env()).stdout
    for p, v in views[0].items():
        assert f"Partition: {p}\tLeader: {v[0]}\tReplicas: {list(v[2])}\tIsr: {list(v[3])}" in out, out
    # auto-creation (Metadata allowing it) goes through the controller too: num.partitions, RF 1
    with RawClient(cluster.nodes[3].bootstrap) as cl:
        auto = metadata_raw(cl, ["auto-made"], auto_create=True).topics[0]
    assert auto.error_code == 0 and len(auto.partitions) == 1 and len(auto.partitions[0].replica_nodes) == 1
    wait_until(lambda: all(len(partitions(cluster, n, "auto-made")) == 1 for n in cluster.ids))
    # Kafka's kafka-topics --create (the Java admin client: CreateTopics to the controller it was told of)
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    lab.fetch()
    res = lab.run_tool("kafka-topics", ["--bootstrap-server", cluster.nodes[3].bootstrap, "--create", "--topic",
                                        "from-java", "--partitions", "2", "--replication-factor", "3"], timeout=90)
    assert res.returncode == 0 and "Created topic from-java." in res.stdout, res.stdout + res.stderr[-2000:]
    wait_until(lambda: all(len(partitions(cluster, n, "from-java")) == 2 for n in cluster.ids))
    assert all(sorted(v[2]) == [1, 2, 3] for v in partitions(cluster, 1, "from-java").values())
    # RF above the registered brokers: Kafka's error
    bad = create(cluster.nodes[2].bootstrap, "too-many", 1, 4)
    assert bad.error_code == 38 and "only 3 broker(s) are registered" in bad.error_message
    # Kafka's kafka-topics --describe (DescribeTopicPartitions) shows the same
    res = lab.run_tool("kafka-topics", ["--bootstrap-server", cluster.nodes[2].bootstrap, "--describe",
                                        "--topic", "orders"], timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [line for line in res.stdout.splitlines() if "Partition: " in line]
    assert len(rows) == 3, res.stdout
    for row in rows:
        fields = {k: v.strip() for k, v in re.findall(r"(\w+): ([^\t]*)", row)}
        leader, _e, replicas, isr, _o = views[0][int(fields["Partition"])]
        assert int(fields["Leader"]) == leader
        assert fields["Replicas"] == ",".join(map(str, replicas)) and sorted(fields["Isr"].split(",")) == ["1", "2", "3"]


def test_kill_9_of_the_controller_node(cluster):
    """The active controller's node, leader of some partitions, is killed: a new controller carries
    on (a topic is created through it); the dead broker is fenced after the session timeout and its
    leaderships move to other ISR members; back, it registers again and is unfenced."""
    assert create(cluster.nodes[1].bootstrap, "events", 6, 3).error_code == 0
    controller, epoch = cluster.agreed_leader(cluster.ids)
    before = wait_until(lambda: (lambda v: v if len(v) == 6 else None)(partitions(cluster, controller, "events")))
    victim = controller
    assert any(v[0] == victim for v in before.values())  # 6 partitions round-robin over 3 brokers
    cluster.kill(victim)
    t0 = time.monotonic()
    rest = [n for n in cluster.ids if n != victim]
    result = create(cluster.nodes[rest[0]].bootstrap, "after-failover", 2, 2)  # retried at the new controller
    assert result.error_code == 0, result
    new_controller, _ = cluster.agreed_leader(rest, newer_than=epoch)
    assert new_controller != victim

    def moved() -> bool:
        views = [partitions(cluster, n, "events") for n in rest]
        return views[0] == views[1] and all(v[0] != victim and victim not in v[3] for v in views[0].values())
    wait_until(moved, timeout=10, what="leaderships moved away from the killed broker")
    assert time.monotonic() - t0 < SESSION_MS / 1000 + 6
    after = partitions(cluster, rest[0], "events")
    for p, (leader, epoch_, replicas, isr, offline) in after.items():
        old_leader, old_epoch, old_replicas, old_isr, _ = before[p]
        assert replicas == old_replicas and leader in old_isr and offline == (victim,)
        assert epoch_ == old_epoch + (1 if old_leader == victim else 0)
    assert brokers(cluster, rest[0]) == set(rest)
    wait_until(lambda: all(v[0] in rest for v in partitions(cluster, rest[1], "after-failover").values()),
               what="the new topic led by live brokers")
    # the killed node comes back: registers again and is unfenced (the ISR grows back through its leaders)
    cluster.restart(victim)
    # its first Metadata answer already knows the topic created while it was down: a node serves its
    # broker listener once caught up with the metadata log (Kafka: request processing starts after the
    # initial catch-up), never from the image it had when it died
    with RawClient(cluster.nodes[victim].bootstrap, timeout=15) as cl:
        first = metadata_raw(cl, ["after-failover"], version=12).topics[0]
    assert first.error_code == 0 and len(first.partitions) == 2, first
    wait_until(lambda: all(brokers(cluster, n) == {1, 2, 3} for n in cluster.ids), timeout=15,
               what="the restarted broker unfenced")
    assert all(v[0] in rest for v in partitions(cluster, victim, "events").values())
    assert len(partitions(cluster, victim, "after-failover")) == 2


def test_a_paused_old_controller_cannot_commit_a_decision(cluster):
    controller, epoch = cluster.agreed_leader(cluster.ids)
    rest = [n for n in cluster.ids if n != controller]
    name = f"never-{uuid.uuid4().hex[:6]}"
    cluster.pause(controller)
    try:
        # the request waits in the paused controller's socket; the others elect a new controller meanwhile
        cl = RawClient(f"127.0.0.1:{cluster.controller_ports[controller]}", timeout=30)
        req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=3, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False)
        cl.send(req, 7)
        cluster.agreed_leader(rest, timeout=10, newer_than=epoch)
    finally:
        cluster.resume(controller)
    resp = cl.recv(CreateTopicsResponse, 7)
    cl.close()
    assert resp.topics[0].error_code == 41  # NOT_CONTROLLER: the old controller's decision was never committed
    time.sleep(1.0)  # a negative check: give a wrongly committed topic the time to show up anywhere
    for n in cluster.ids:
        assert partitions(cluster, n, name) == {}, f"node {n} has the topic the stale controller decided"


def test_alter_partition_configs_partitions_deletion_and_producer_ids(cluster):
    from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

    from minikafka.protocol.messages import AlterPartitionRequest, AlterPartitionResponse
    created = create(cluster.nodes[1].bootstrap, "isr", 1, 3)
    assert created.error_code == 0
    topic_id = created.topic_id
    views = wait_until(lambda: (lambda vs: vs if vs[0] == vs[1] == vs[2] and vs[0] else None)(
        [partitions(cluster, n, "isr") for n in cluster.ids]), what="every node knows the topic")
    leader, leader_epoch, replicas, isr, _ = views[0][0]
    follower = next(b for b in replicas if b != leader)
    controller, _ = cluster.agreed_leader(cluster.ids)

    def alter(broker: int, new_isr: list[int], partition_epoch: int, epoch: int = leader_epoch):
        P = AlterPartitionRequest.TopicData.PartitionData
        req = AlterPartitionRequest(broker_id=broker, broker_epoch=-1, topics=[AlterPartitionRequest.TopicData(
            topic_id=topic_id, partitions=[P(partition_index=0, leader_epoch=epoch, new_isr_with_epochs=[
                P.BrokerState(broker_id=b, broker_epoch=-1) for b in new_isr], leader_recovery_state=0,
                partition_epoch=partition_epoch)])])
        with RawClient(f"127.0.0.1:{cluster.controller_ports[controller]}") as cl:
            resp = cl.request(req, 3, AlterPartitionResponse)
        assert resp.error_code == 0
        return resp.topics[0].partitions[0]
    shrunk = [b for b in isr if b != follower]
    p = alter(leader, shrunk, 0)
    assert (p.error_code, sorted(p.isr), p.partition_epoch, p.leader_id, p.leader_epoch) == \
        (0, sorted(shrunk), 1, leader, leader_epoch)
    assert alter(leader, list(isr), 0).error_code == 95  # INVALID_UPDATE_VERSION: a stale partition epoch
    assert alter(leader, list(isr), 1, leader_epoch + 1).error_code == 74  # FENCED_LEADER_EPOCH
    assert alter(follower, list(isr), 1).error_code == 42  # INVALID_REQUEST: not from the leader
    assert alter(leader, [*shrunk, 99], 1).error_code == 107  # INELIGIBLE_REPLICA
    wait_until(lambda: all(sorted(partitions(cluster, n, "isr")[0][3]) == sorted(shrunk) for n in cluster.ids),
               what="every node sees the shrunk ISR")
    assert alter(leader, list(isr), 1).partition_epoch == 2
    # topic configs: altered on one node, recorded by the controller, applied on every node
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    admin = AdminClient({"bootstrap.servers": cluster.nodes[follower].bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "isr", incremental_configs=[
        ConfigEntry("retention.ms", "12345", incremental_operation=AlterConfigOpType.SET)])
    list(admin.incremental_alter_configs([res]).values())[0].result(15)

    def configs(n: int) -> dict:
        data = json.loads((cluster.nodes[n].data_dir / "__minikafka_topics.json").read_text())
        return next(t["configs"] for t in data["topics"] if t["name"] == "isr")
    wait_until(lambda: all(configs(n) == {"retention.ms": "12345"} for n in cluster.ids),
               what="every node has the topic's new config")
    # more partitions, then deletion, each asked of one node and applied on all
    from confluent_kafka.admin import NewPartitions
    admin.create_partitions([NewPartitions("isr", 3)])["isr"].result(15)
    wait_until(lambda: all(len(partitions(cluster, n, "isr")) == 3 for n in cluster.ids), what="3 partitions")
    for n in cluster.ids:
        local = {p for p, v in partitions(cluster, n, "isr").items() if n in v[2]}
        wait_until(lambda n=n, local=local: all((cluster.nodes[n].data_dir / f"isr-{p}").exists() for p in local))
    admin.delete_topics(["isr"])["isr"].result(15)
    wait_until(lambda: all(partitions(cluster, n, "isr") == {} and not list(cluster.nodes[n].data_dir.glob("isr-*"))
                           for n in cluster.ids), what="the topic and its logs gone everywhere")
    # producer ids: each broker takes its own block of 1000 from the controller (KIP-730)
    pids = {}
    for n in cluster.ids:
        with RawClient(cluster.nodes[n].bootstrap) as cl:
            resp = cl.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                    producer_id=-1, producer_epoch=-1), 4, InitProducerIdResponse)
        assert resp.error_code == 0
        pids[n] = resp.producer_id
    assert len({pid // 1000 for pid in pids.values()}) == 3, pids


def test_controlled_shutdown_then_preferred_leader_election(cluster):
    """SIGTERM: the controller moves the node's leaderships away before it stops (not after the session
    timeout); back, and in the ISR again, `kafka-leader-election --election-type PREFERRED` gives the
    partition back to its first replica."""
    created = create(cluster.nodes[1].bootstrap, "pref", 3, 3)
    assert created.error_code == 0
    controller, _ = cluster.agreed_leader(cluster.ids)
    before = wait_until(lambda: (lambda v: v if len(v) == 3 else None)(partitions(cluster, controller, "pref")))
    node = next(v[0] for v in before.values() if v[0] != controller)
    led = [p for p, v in before.items() if v[0] == node]
    cluster.nodes[node].stop()
    assert "controlled shutdown: the controller moved" in cluster.nodes[node].log_path.read_text()
    after = partitions(cluster, controller, "pref")  # at once: no session timeout waited for
    assert all(after[p][0] not in (node, -1) and node not in after[p][3] for p in led)
    cluster.restart(node)
    wait_until(lambda: node in brokers(cluster, controller), timeout=15, what="the node unfenced again")
    # the partition's leader takes the node back into the ISR once it has caught up (AlterPartition)
    p0 = led[0]
    wait_until(lambda: node in partitions(cluster, controller, "pref")[p0][3], timeout=15,
               what="the returned node back in the ISR")
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    lab.fetch()
    res = lab.run_tool("kafka-leader-election", ["--bootstrap-server", cluster.nodes[controller].bootstrap,
                                                 "--election-type", "PREFERRED", "--topic", "pref",
                                                 "--partition", str(p0)], timeout=90)
    assert res.returncode == 0 and f"Successfully completed leader election (PREFERRED) for partitions pref-{p0}" \
        in res.stdout, res.stdout + res.stderr[-2000:]
    wait_until(lambda: all(partitions(cluster, n, "pref")[p0][0] == node for n in cluster.ids),
               what="the preferred replica leads again everywhere")


def test_placement_spreads_over_racks_and_uses_a_fenced_broker_as_follower(tmp_path):
    """broker.rack a, a, b: every RF-2 partition has a replica in each rack, and Metadata shows the
    racks. A killed (fenced, still registered) broker gets follower replicas of a topic created while it
    is down (Kafka's StripedReplicaPlacer: RF 3 is accepted, the ISR holds the live two), never a
    leadership; back, it joins those ISRs."""
    c = Cluster(tmp_path, config=CONFIG)
    racks = {1: "rack-a", 2: "rack-a", 3: "rack-b"}
    for n, rack in racks.items():
        c.nodes[n].config["broker.rack"] = rack
    with running(c):
        with RawClient(c.nodes[2].bootstrap, timeout=3) as cl:
            assert {b.node_id: b.rack for b in metadata_raw(cl).brokers} == racks
        assert create(c.nodes[1].bootstrap, "spread", 6, 2).error_code == 0
        spread = wait_until(lambda: (lambda v: v if len(v) == 6 else None)(partitions(c, 1, "spread")))
        assert all(3 in v[2] and ({1, 2} & set(v[2])) for v in spread.values()), spread
        c.kill(1)
        wait_until(lambda: brokers(c, 2) == {2, 3}, timeout=10, what="the killed broker fenced")
        made = create(c.nodes[2].bootstrap, "while-down", 4, 3)
        assert made.error_code == 0, made
        down = wait_until(lambda: (lambda v: v if len(v) == 4 else None)(partitions(c, 3, "while-down")))
        for leader, _epoch, replicas, isr, offline in down.values():
            assert sorted(replicas) == [1, 2, 3] and leader in (2, 3) and sorted(isr) == [2, 3] and offline == (1,)
        c.restart(1)
        wait_until(lambda: all(sorted(v[3]) == [1, 2, 3] for v in partitions(c, 3, "while-down").values()),
                   timeout=20, what="the returned broker in the ISR of the topic made while it was down")

