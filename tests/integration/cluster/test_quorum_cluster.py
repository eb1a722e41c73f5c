"""The metadata quorum between real `minikafka serve` processes (issue 16, first step): three nodes on
loopback in KRaft combined mode elect a leader over Kafka's quorum RPCs, agree on it and on the cluster
id, fail over after kill -9 and SIGSTOP of the leader (the old leader steps down: never two leaders
in one epoch), take a killed node back as a caught-up follower, and answer Kafka's
`kafka-metadata-quorum`. A single node without voters is the single node it always was."""
from __future__ import annotations

import os
import re
import signal
import time

import pytest
from kafka.protocol.admin import (DescribeClusterRequest, DescribeClusterResponse, DescribeQuorumRequest,
                                  DescribeQuorumResponse)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.support.cluster_harness import Cluster
from tests.conftest import BrokerProcess, free_port
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path).start()
    try:
        yield c
    finally:
        c.stop()


def assert_one_leader_per_epoch(cluster: Cluster) -> None:
    twice = {e: ns for e, ns in cluster.leaders_by_epoch().items() if len(ns) > 1}
    assert not twice, f"two leaders in one epoch: {twice}"


def test_a_leader_is_elected_and_everyone_agrees(cluster):
    leader, epoch = cluster.agreed_leader(cluster.ids)
    assert epoch >= 1
    # the leader's log (LEADER_CHANGE, ClusterId) is committed and every voter has fetched it
    wait_until(lambda: (lambda d: d[3] >= 2 and all(e == d[3] for e in d[4].values()))(cluster.describe(leader)),
               what="every voter caught up")
    ids = set()
    for node in cluster.nodes.values():
        meta = (node.data_dir / "meta.properties").read_text()
        ids.add(re.search(r"cluster.id=(\S+)", meta).group(1))
        with RawClient(node.bootstrap) as c:  # clients see the same id
            assert metadata_raw(c).cluster_id in ids
    assert len(ids) == 1
    # the controller listener advertises the quorum's APIs; the broker listener does not
    for port, has_vote in ((cluster.controller_ports[leader], True), (cluster.nodes[leader].port, False)):
        with RawClient(f"127.0.0.1:{port}") as c:
            keys = {k.api_key for k in c.request(ApiVersionsRequest(client_software_name="t",
                                                                    client_software_version="1"), 3,
                                                 ApiVersionsResponse).api_keys}
        assert ({52, 53, 54} <= keys) == has_vote and (0 in keys) != has_vote and 55 in keys


def test_kill_9_of_the_leader_elects_a_new_one_and_the_old_rejoins_caught_up(cluster):
    leader, epoch = cluster.agreed_leader(cluster.ids)
    cluster.nodes[leader].kill()
    t0 = time.monotonic()
    rest = [n for n in cluster.ids if n != leader]
    new_leader, new_epoch = cluster.agreed_leader(rest, timeout=8.0, newer_than=epoch)
    assert new_leader != leader and time.monotonic() - t0 < 8.0
    cluster.nodes[leader].start()
    # the restarted node follows the new leader; no new election
    assert cluster.agreed_leader(cluster.ids, newer_than=epoch) == (new_leader, new_epoch)

    def caught_up() -> bool:
        err, _, _, hw, ends = cluster.describe(new_leader)
        return err == 0 and ends.get(leader) == hw == max(ends.values())
    wait_until(caught_up, timeout=8.0, what="the restarted node caught up")
    assert_one_leader_per_epoch(cluster)


def test_a_paused_leader_is_replaced_and_steps_down_when_it_resumes(cluster):
    leader, epoch = cluster.agreed_leader(cluster.ids)
    pid = cluster.nodes[leader].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        rest = [n for n in cluster.ids if n != leader]
        new_leader, new_epoch = cluster.agreed_leader(rest, timeout=8.0, newer_than=epoch)
    finally:
        os.kill(pid, signal.SIGCONT)
    # the old leader notices (check quorum, or the newer epoch in any answer) and follows the new one
    assert cluster.agreed_leader(cluster.ids, newer_than=epoch) == (new_leader, new_epoch)
    assert_one_leader_per_epoch(cluster)
    t0 = time.monotonic()
    for n in [leader] + rest:  # and every node shuts down cleanly at once (no watchdog exit)
        assert cluster.nodes[n].stop() == 0, n
    assert time.monotonic() - t0 < 6.0


def test_a_follower_back_from_a_pause_does_not_disturb_the_leader(cluster):
    """KIP-996 pre-vote: a follower paused for three fetch timeouts asks for pre-votes when it resumes;
    the leader and the other follower refuse them (they still hear from each other), it follows the
    leader again: the leader and the epoch stay (without pre-vote, every such pause forced an election)."""
    leader, epoch = cluster.agreed_leader(cluster.ids)
    follower = next(n for n in cluster.ids if n != leader)
    for _ in range(2):
        cluster.pause(follower)
        time.sleep(3.0)  # three controller.quorum.fetch.timeout.ms: its timeout has passed when it resumes
        cluster.resume(follower)
        wait_until(lambda: (lambda d: d[4].get(follower, -1) >= d[3] - 1)(cluster.describe(leader)),
                   timeout=10, what="the resumed follower caught up")
        assert cluster.agreed_leader(cluster.ids) == (leader, epoch)
    assert_one_leader_per_epoch(cluster)


def test_a_leader_that_shuts_down_hands_over_at_once(cluster):
    leader, epoch = cluster.agreed_leader(cluster.ids)
    t0 = time.monotonic()
    assert cluster.nodes[leader].stop() == 0
    rest = [n for n in cluster.ids if n != leader]
    cluster.agreed_leader(rest, timeout=5.0, newer_than=epoch)
    assert time.monotonic() - t0 < 5.0
    assert "resigning leadership" in cluster.nodes[leader].log_path.read_text()


def test_a_full_restart_keeps_the_log_and_the_cluster_id(cluster):
    leader, epoch = cluster.agreed_leader(cluster.ids)
    wait_until(lambda: all((node.data_dir / "meta.properties").exists() for node in cluster.nodes.values()),
               what="every node recorded the agreed cluster id")
    hw = cluster.describe(leader)[3]
    metas = {n: (node.data_dir / "meta.properties").read_text() for n, node in cluster.nodes.items()}
    for node in cluster.nodes.values():
        assert node.stop() == 0
    cluster.start()
    new_leader, new_epoch = cluster.agreed_leader(cluster.ids, newer_than=epoch)
    caught_up = wait_until(lambda: (lambda d: d[3] > hw and all(e == d[3] for e in d[4].values()) and d[3])(
        cluster.describe(new_leader)), what="the new epoch's entry committed everywhere")
    assert {n: (node.data_dir / "meta.properties").read_text() for n, node in cluster.nodes.items()} == metas
    for node in cluster.nodes.values():
        assert node.stop() == 0
    from minikafka.raft.store import FilePersistentState
    logs = []
    for node in cluster.nodes.values():
        p = FilePersistentState(node.data_dir / "__cluster_metadata-0")
        logs.append(p.log.entries)
        p.close()
    # what every voter had fetched is the same everywhere (stopping may add hand-over epochs after it)
    assert logs[0][:caught_up] == logs[1][:caught_up] == logs[2][:caught_up] and len(logs[0]) >= caught_up
    kinds = [e.payload["type"] for e in logs[0] if isinstance(e.payload, dict)]
    assert kinds.count("ClusterId") == 1 and kinds[0] == "ClusterId"  # then the brokers' registrations etc.
    assert [e.epoch for e in logs[0]] == sorted(e.epoch for e in logs[0]) and logs[0][-1].epoch >= new_epoch


def test_quorum_rpcs_are_refused_from_another_cluster_and_on_broker_listeners(cluster):
    from minikafka.raft import wire
    from minikafka.protocol.errors import INCONSISTENT_CLUSTER_ID
    from minikafka.raft.core import VoteRequest
    from minikafka.protocol.messages import VoteRequest as KVoteRequest, VoteResponse as KVoteResponse
    leader, epoch = cluster.agreed_leader(cluster.ids)
    follower = next(n for n in cluster.ids if n != leader)
    wait_until(lambda: (cluster.nodes[follower].data_dir / "meta.properties").exists(), what="cluster id agreed")
    stale = VoteRequest(epoch, 99, 0, 0)
    with RawClient(f"127.0.0.1:{cluster.controller_ports[follower]}") as c:
        resp = c.request(wire.vote_request(stale, follower, "another-cluster"), 1, KVoteResponse)
        assert resp.error_code == INCONSISTENT_CLUSTER_ID
        resp = c.request(wire.vote_request(stale, follower, None), 1, KVoteResponse)  # no id: Kafka accepts it
        part = resp.topics[0].partitions[0]
        assert (part.vote_granted, part.leader_id, part.leader_epoch) == (False, leader, epoch)
    with RawClient(f"127.0.0.1:{cluster.controller_ports[follower]}") as c:  # Kafka 4.3's answers
        r = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1,
                                             include_fenced_brokers=False), 2, DescribeClusterResponse)
        assert (r.error_code, r.brokers) == (114, [])
        def controllers():  # the registered controllers (KIP-919): each registers once caught up
            r = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2,
                                                 include_fenced_brokers=False), 2, DescribeClusterResponse)
            assert (r.error_code, r.controller_id) == (0, leader)
            return sorted((b.broker_id, b.port) for b in r.brokers)
        wait_until(lambda: controllers() == sorted(cluster.controller_ports.items()), timeout=20,
                   what="every controller registered")
        q = c.request(DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
            topic_name="other", partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])]),
            2, DescribeQuorumResponse)
        assert q.error_code == 0 and q.topics[0].partitions[0].error_code == 3
    with RawClient(cluster.nodes[follower].bootstrap) as c:  # Vote is no API of a broker listener
        c.send(wire.vote_request(stale, follower, None), 1)
        assert c.closed_by_peer()
    assert cluster.agreed_leader(cluster.ids) == (leader, epoch)  # nothing changed


def test_kafka_metadata_quorum_describes_the_quorum(cluster):
    """--bootstrap-controller (a follower's controller listener) and --bootstrap-server (a follower's
    broker listener, which forwards DescribeQuorum to the leader)."""
    lab = pytest.importorskip("scripts.apache_kafka")
    leader, epoch = cluster.agreed_leader(cluster.ids)
    follower = next(n for n in cluster.ids if n != leader)
    res = lab.run_tool("kafka-metadata-quorum", ["--bootstrap-controller",
                                                 f"127.0.0.1:{cluster.controller_ports[follower]}",
                                                 "describe", "--status"], timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", res.stdout, re.M))
    assert (int(fields["LeaderId"]), int(fields["LeaderEpoch"])) == (leader, epoch)
    meta = (cluster.nodes[leader].data_dir / "meta.properties").read_text()
    assert f"cluster.id={fields['ClusterId']}" in meta
    for n, port in cluster.controller_ports.items():
        assert f'{{"id": {n}, "endpoints": ["CONTROLLER://127.0.0.1:{port}"]}}' in fields["CurrentVoters"]
    res = lab.run_tool("kafka-metadata-quorum", ["--bootstrap-server", cluster.nodes[follower].bootstrap,
                                                 "describe", "--replication"], timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [line.split() for line in res.stdout.splitlines()[1:] if line.strip()]
    assert sorted((int(r[0]), r[-1]) for r in rows) == sorted((n, "Leader" if n == leader else "Follower")
                                                               for n in cluster.ids)


def test_a_single_node_is_unchanged(tmp_path):
    """Voters naming only this node (or none): no quorum, no metadata log, the usual APIs."""
    port, controller = free_port(), free_port()
    node = BrokerProcess(tmp_path / "data", {
        "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}"}, port=port).start()
    try:
        with RawClient(node.bootstrap) as c:
            keys = {k.api_key for k in c.request(ApiVersionsRequest(client_software_name="t",
                                                                    client_software_version="1"), 3,
                                                 ApiVersionsResponse).api_keys}
            assert 0 in keys and not {52, 53, 54} & keys and 55 in keys  # DescribeQuorum: as the sole voter
            assert metadata_raw(c).cluster_id
        assert not (node.data_dir / "__cluster_metadata-0").exists()
        assert "metadata quorum" not in node.log_path.read_text()
    finally:
        node.stop()
