"""AssignReplicasToDirs (API 73, KIP-858) in a three-node cluster whose nodes have two log dirs each:
every broker tells the active controller in which dir each of its replicas lives, at creation and after
an AlterReplicaLogDirs move; the metadata log the controller committed then names, per replica, the
directory.id of the dir the replica's log is in. Raw requests on the controller listener get Kafka
4.3.1's errors (STALE_BROKER_EPOCH, NOT_CONTROLLER, per partition UNKNOWN_TOPIC_ID /
UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER)."""
from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from minikafka.protocol.messages import (AssignReplicasToDirsRequest, AssignReplicasToDirsResponse,
                                         BrokerRegistrationRequest, BrokerRegistrationResponse)
from tests.integration.admin.test_alter_replica_log_dirs import NONE, alter, where
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

STALE_BROKER_EPOCH, NOT_CONTROLLER = 77, 41
UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 100, 3, 6
TOPIC = "jbod-dirs"


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, size=3)
    for n, node in c.nodes.items():
        node.config["log.dirs"] = f"{tmp_path}/node{n}/a,{tmp_path}/node{n}/b"
    with running(c) as c:
        yield c


def dir_id(path: str) -> str:
    """directory.id of a log dir's meta.properties (Kafka's url-safe base64 Uuid)."""
    for line in (Path(path) / "meta.properties").read_text().splitlines():
        if line.startswith("directory.id="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"no directory.id in {path}")


def node_log(tmp_path: Path, n: int) -> str:
    return "".join(p.read_text(errors="replace") for p in (tmp_path / f"node{n}").rglob("broker-*.log"))


def committed_image(tmp_path: Path, n: int):
    """Node n's metadata log (stopped) replayed into an image."""
    from minikafka.metadata.image import MetadataImage
    from minikafka.raft.store import FilePersistentState
    (log_dir,) = list((tmp_path / f"node{n}").rglob("__cluster_metadata-0"))
    state = FilePersistentState(log_dir)
    try:
        assert state.log.start_offset == 0  # no snapshot with the default thresholds
        image = MetadataImage()
        for offset, entry in enumerate(state.log.entries):
            image.apply(entry.payload, offset)
        return image
    finally:
        state.close()


def assign(port: int, broker_id: int, epoch: int, dirs: dict[uuid.UUID, dict[uuid.UUID, list[int]]]):
    D = AssignReplicasToDirsRequest.DirectoryData
    req = AssignReplicasToDirsRequest(broker_id=broker_id, broker_epoch=epoch, directories=[
        D(id=d, topics=[D.TopicData(topic_id=t, partitions=[D.TopicData.PartitionData(partition_index=i)
                                                            for i in parts]) for t, parts in topics.items()])
        for d, topics in dirs.items()])
    with RawClient(f"127.0.0.1:{port}", timeout=10) as cl:
        return cl.request(req, 0, AssignReplicasToDirsResponse)


def wire(dir_id_text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(dir_id_text + "=" * (-len(dir_id_text) % 4)))


def test_the_controller_learns_each_replicas_dir_at_creation_and_after_a_move(cluster, tmp_path):
    c = cluster
    C = CreateTopicsRequest.CreatableTopic
    with RawClient(c.nodes[1].bootstrap, timeout=40) as cl:
        resp = cl.request(CreateTopicsRequest(topics=[C(name=TOPIC, num_partitions=-1, replication_factor=-1,
                                                        configs=[], assignments=[C.CreatableReplicaAssignment(
                                                            partition_index=0, broker_ids=[1, 2, 3])])],
                                              timeout_ms=30000, validate_only=False), 7, CreateTopicsResponse)
    assert resp.topics[0].error_code == 0, resp
    homes = {}
    for n in c.ids:
        wait_until(lambda n=n: (0, False) in where(c.nodes[n].bootstrap, TOPIC), timeout=30, what=f"node {n}'s log")
        homes[n] = where(c.nodes[n].bootstrap, TOPIC)[(0, False)]
        # the controller recorded UNASSIGNED (two dirs): the broker assigns the dir its log was created in
        wait_until(lambda n=n: f"the controller records {TOPIC}-0 in log dir {dir_id(homes[n])}"
                   in node_log(tmp_path, n), timeout=30, what=f"node {n}'s assignment")
    mover = 2
    dest = next(f"{tmp_path}/node{mover}/{d}" for d in "ab" if not homes[mover].endswith(f"/{d}"))
    assert alter(c.nodes[mover].bootstrap, {dest: {TOPIC: [0]}}) == {(TOPIC, 0): NONE}
    wait_until(lambda: where(c.nodes[mover].bootstrap, TOPIC) == {(0, False): dest}, timeout=60, what="the move")
    wait_until(lambda: f"the controller records {TOPIC}-0 in log dir {dir_id(dest)}" in node_log(tmp_path, mover),
               timeout=30, what="the assignment after the move")
    homes[mover] = dest

    # raw AssignReplicasToDirs on the controller listener
    leader, _epoch = c.agreed_leader(c.ids, timeout=20)
    other = next(n for n in c.ids if n != leader)
    with RawClient(c.nodes[1].bootstrap, timeout=5) as cl:
        (t,) = metadata_raw(cl, [TOPIC], version=12).topics
    topic_id = t.topic_id if isinstance(t.topic_id, uuid.UUID) else uuid.UUID(bytes=t.topic_id)
    some_dir = wire(dir_id(dest))
    for broker_id, epoch in ((mover, -5), (99, 0)):  # a wrong epoch, an unregistered broker
        r = assign(c.controller_ports[leader], broker_id, epoch, {some_dir: {topic_id: [0]}})
        assert (r.error_code, r.directories) == (STALE_BROKER_EPOCH, [])
    assert assign(c.controller_ports[other], mover, -5, {some_dir: {topic_id: [0]}}).error_code == NOT_CONTROLLER
    # a broker 4 registered by hand (its epoch known) is not a replica of the topic
    meta = next((tmp_path / "node1").rglob("meta.properties")).read_text()
    cluster_id = next(l.split("=", 1)[1] for l in meta.splitlines() if l.startswith("cluster.id="))
    L = BrokerRegistrationRequest.Listener
    fake_dir = uuid.uuid4()
    with RawClient(f"127.0.0.1:{c.controller_ports[leader]}", timeout=10) as cl:
        reg = cl.request(BrokerRegistrationRequest(
            broker_id=4, cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
            listeners=[L(name="PLAINTEXT", host="127.0.0.1", port=1, security_protocol=0)], features=[], rack=None,
            is_migrating_zk_broker=False, log_dirs=[fake_dir], previous_broker_epoch=-1), 4,
            BrokerRegistrationResponse)
    assert reg.error_code == 0 and reg.broker_epoch > 0, reg
    unknown = uuid.uuid4()
    r = assign(c.controller_ports[leader], 4, reg.broker_epoch, {fake_dir: {topic_id: [0, 7], unknown: [0]}})
    assert r.error_code == 0
    assert [(d.id, [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in d.topics])
            for d in r.directories] == [(fake_dir, [(topic_id, [(0, NOT_LEADER_OR_FOLLOWER),
                                                                (7, UNKNOWN_TOPIC_OR_PARTITION)]),
                                                    (unknown, [(0, UNKNOWN_TOPIC_ID)])])]

    # what the controller committed: each replica's dir is the one its log is in, on every node alike
    c.stop()
    want = tuple(dir_id(homes[b]) for b in (1, 2, 3))
    for n in c.ids:
        image = committed_image(tmp_path, n)
        p = image.partition(TOPIC, 0)
        assert p.replicas == (1, 2, 3) and p.directories == want, (n, p)
