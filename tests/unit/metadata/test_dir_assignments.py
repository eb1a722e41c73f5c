"""KIP-858 replica directories in the metadata (metadata/records.py, image.py, controller.py): each
partition keeps one log dir id per replica (Kafka's PartitionRecord / PartitionChangeRecord Directories);
the controller's AssignReplicasToDirs decisions and error codes are Kafka 4.3.1's
ReplicationControlManager.handleAssignReplicasToDirs; snapshots from before the field still load."""
from __future__ import annotations

import random

import pytest

from minikafka.metadata import records as r
from minikafka.metadata.controller import Controller, ControllerConfig, ControllerError, dir_online
from minikafka.metadata.image import MetadataImage
from minikafka.protocol.errors import (NONE, NOT_LEADER_OR_FOLLOWER, STALE_BROKER_EPOCH, UNKNOWN_TOPIC_ID,
                                       UNKNOWN_TOPIC_OR_PARTITION)
from tests.unit.metadata.test_cluster_metadata import Log

DIRS = {b: (f"dirA{b}AAAAAAAAAAAAAAAAA", f"dirB{b}AAAAAAAAAAAAAAAAA") for b in (1, 2, 3)}


def cluster(dirs=DIRS):
    log = Log()
    c = Controller(MetadataImage(), log.propose, ControllerConfig(1000), 0, random.Random(1))
    epochs = {}
    for b in (1, 2, 3):
        epochs[b] = c.register_broker(b, f"inc-{b}", [("PLAINTEXT", "h", 9000 + b, "PLAINTEXT")], None, 0,
                                      len(log.entries), log_dirs=dirs[b])
        c.heartbeat(b, epochs[b], epochs[b], False, False, len(log.entries), 0)
    return c, log, epochs


def test_new_partitions_start_unassigned_with_several_dirs_and_in_the_only_dir_with_one():
    c, _log, _ = cluster()
    c.create_topic("t", 2, 3, {})
    p = c.image.partition("t", 0)
    assert p.directories == (r.UNASSIGNED_DIR,) * 3 and p.directory(1) == r.UNASSIGNED_DIR and p.directory(9) is None
    single = {b: (f"only{b}AAAAAAAAAAAAAAAAA",) for b in (1, 2, 3)}
    c, _log, _ = cluster(single)
    c.create_topic("t", 1, 2, {})
    p = c.image.partition("t", 0)
    assert p.directories == tuple(single[b][0] for b in p.replicas)


def test_assign_records_the_dir_and_replays_the_same():
    c, log, epochs = cluster()
    tid, _plan = c.create_topic("t", 2, 3, {})
    tid_b = c.image.topics["t"].topic_id
    before = c.image.partition("t", 0)
    out = c.assign_replicas_to_dirs(2, epochs[2], [(DIRS[2][1], [(tid_b, [0, 1])])])
    assert out == [(DIRS[2][1], [(tid_b, [(0, NONE), (1, NONE)])])]
    p = c.image.partition("t", 0)
    assert p.directory(2) == DIRS[2][1] and p.directory(1) == r.UNASSIGNED_DIR
    assert p.partition_epoch == before.partition_epoch + 1 and p.leader_epoch == before.leader_epoch
    assert log.entries[-2] == {"type": "PartitionChange", "topicId": tid, "partition": 0,
                               "directories": [DIRS[2][1] if b == 2 else r.UNASSIGNED_DIR for b in p.replicas]}
    # the same assignment again changes nothing (Kafka's PartitionChangeBuilder: no record)
    n = len(log.entries)
    assert c.assign_replicas_to_dirs(2, epochs[2], [(DIRS[2][1], [(tid_b, [0])])])[0][1][0][1] == [(0, NONE)]
    assert len(log.entries) == n
    replayed = log.replay()
    assert replayed.topics["t"].partitions == c.image.topics["t"].partitions


def test_errors_per_partition_and_stale_epochs():
    c, log, epochs = cluster()
    c.create_topic("t", 1, 2, {}, assignments={0: [1, 2]})
    tid = c.image.topics["t"].topic_id
    unknown = bytes(range(16))
    out = c.assign_replicas_to_dirs(3, epochs[3], [(DIRS[3][0], [(tid, [0, 5]), (unknown, [0])])])
    assert out == [(DIRS[3][0], [(tid, [(0, NOT_LEADER_OR_FOLLOWER), (5, UNKNOWN_TOPIC_OR_PARTITION)]),
                                 (unknown, [(0, UNKNOWN_TOPIC_ID)])])]
    n = len(log.entries)
    for broker, epoch in ((1, epochs[1] + 1), (1, -1), (42, 0)):
        with pytest.raises(ControllerError) as err:
            c.assign_replicas_to_dirs(broker, epoch, [(DIRS[1][0], [(tid, [0])])])
        assert err.value.code == STALE_BROKER_EPOCH
    assert len(log.entries) == n


def test_an_offline_dir_takes_the_replica_out_of_the_isr():
    """A dir the broker did not register (or LOST) is offline: the dir is recorded and the replica leaves
    the ISR and leadership (Kafka's offline-dir-assignment)."""
    c, _log, epochs = cluster()
    c.create_topic("t", 1, 3, {}, assignments={0: [1, 2, 3]})
    tid = c.image.topics["t"].topic_id
    assert c.assign_replicas_to_dirs(1, epochs[1], [(r.LOST_DIR, [(tid, [0])])])[0][1][0][1] == [(0, NONE)]
    p = c.image.partition("t", 0)
    assert p.directory(1) == r.LOST_DIR and 1 not in p.isr and p.leader == 2
    assert dir_online(r.UNASSIGNED_DIR, ["x"]) and dir_online(r.MIGRATING_DIR, ["x"])
    assert not dir_online(r.LOST_DIR, []) and not dir_online("y", ["x"]) and dir_online("y", [])


def test_reassignment_keeps_the_dirs_of_kept_replicas():
    c, _log, epochs = cluster()
    c.create_topic("t", 1, 2, {}, assignments={0: [1, 2]})
    tid = c.image.topics["t"].topic_id
    c.assign_replicas_to_dirs(2, epochs[2], [(DIRS[2][0], [(tid, [0])])])
    c.alter_reassignment("t", 0, [2, 3])
    p = c.image.partition("t", 0)
    assert p.directory(2) == DIRS[2][0] and p.directory(3) == r.UNASSIGNED_DIR
    assert len(p.directories) == len(p.replicas)


def test_snapshot_round_trip_and_an_older_snapshot_without_directories():
    c, _log, epochs = cluster()
    c.create_topic("t", 1, 3, {})
    tid = c.image.topics["t"].topic_id
    c.assign_replicas_to_dirs(3, epochs[3], [(DIRS[3][1], [(tid, [0])])])
    data = c.image.to_json()
    again = MetadataImage.from_json(data)
    assert again.topics["t"].partitions == c.image.topics["t"].partitions
    for t in data["topics"]:  # a snapshot written before KIP-858 (10 fields per partition)
        t[3] = [p[:10] for p in t[3]]
    old = MetadataImage.from_json(data)
    assert old.partition("t", 0).directories == (r.UNASSIGNED_DIR,) * 3
    # an old PartitionRecord without directories applies too
    image = MetadataImage()
    image.apply(r.topic("u", "11111111-1111-1111-1111-111111111111"), 0)
    image.apply({"type": "Partition", "topicId": "11111111-1111-1111-1111-111111111111", "partition": 0,
                 "replicas": [1, 2], "isr": [1, 2], "leader": 1}, 1)
    assert image.partition("u", 0).directories == (r.UNASSIGNED_DIR, r.UNASSIGNED_DIR)
