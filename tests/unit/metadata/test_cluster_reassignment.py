"""Replica reassignment decisions of the controller (KIP-455; metadata/controller.py), pure:
the stages Kafka's ReplicationControlManager / PartitionChangeBuilder go through, checked record by
record and against a replay of the log."""
from __future__ import annotations

import json
import uuid

import pytest

from minikafka.metadata.controller import (INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR,
                                                      NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION,
                                                      ControllerError)
from minikafka.metadata.image import MetadataImage

from .test_cluster_metadata import cluster


def _topic(c, replicas: list[int]):
    """Topic "t", one partition with these replicas (all in the ISR, the first leads)."""
    tid, _ = c.create_topic("t", 1, len(replicas), {}, assignments={0: replicas})
    return uuid.UUID(tid).bytes


def _error(fn, *args) -> int:
    with pytest.raises(ControllerError) as e:
        fn(*args)
    return e.value.code


def _join_isr(c, epochs, tb: bytes, broker: int):
    """The leader reports `broker` caught up (AlterPartition expanding the ISR)."""
    p = c.image.partition("t", 0)
    new_isr = [(b, epochs[b]) for b in (*p.isr, broker)]
    return c.alter_partition(p.leader, tb, 0, p.leader_epoch, p.partition_epoch, new_isr)


def test_a_move_adds_first_and_removes_once_the_new_replica_is_in_sync():
    c, log, epochs = cluster(4)
    tb = _topic(c, [1, 2, 3])
    before = c.image.partition("t", 0)
    c.alter_reassignment("t", 0, [4, 2, 3])
    p = c.image.partition("t", 0)
    assert (p.replicas, p.adding, p.removing, p.isr, p.leader) == ((4, 2, 3, 1), (4,), (1,), (1, 2, 3), 1)
    assert p.leader_epoch == before.leader_epoch  # nothing removed yet: no fencing
    assert c.reassignments(None) == [("t", [p])]
    done = _join_isr(c, epochs, tb, 4)  # completes: 1 leaves, the leader moves to the first target replica
    assert (done.replicas, done.adding, done.removing, done.isr, done.leader) == ((4, 2, 3), (), (), (2, 3, 4), 4)
    assert done.leader_epoch == before.leader_epoch + 1
    assert c.reassignments(None) == []
    replayed = log.replay().partition("t", 0)
    assert replayed == done


def test_a_removal_or_reorder_within_the_isr_completes_at_once_and_fences_removed_replicas():
    c, log, epochs = cluster(3)
    _topic(c, [1, 2, 3])
    epoch = c.image.partition("t", 0).leader_epoch
    c.alter_reassignment("t", 0, [1, 2])
    p = c.image.partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ((1, 2), (1, 2), 1, False)
    assert p.leader_epoch == epoch + 1  # a replica went: the leader epoch is bumped although the leader stays
    c.alter_reassignment("t", 0, [2, 1])  # reorder only
    q = c.image.partition("t", 0)
    assert (q.replicas, q.leader, q.leader_epoch) == ((2, 1), 1, epoch + 1)  # the leader stays where allowed
    assert log.replay().partition("t", 0) == q


def test_cancel_reverts_to_the_original_replicas():
    c, log, epochs = cluster(4)
    _topic(c, [1, 2, 3])
    assert _error(c.alter_reassignment, "t", 0, None) == NO_REASSIGNMENT_IN_PROGRESS
    c.alter_reassignment("t", 0, [4, 2, 3])
    c.alter_reassignment("t", 0, None)
    p = c.image.partition("t", 0)
    # Kafka's PartitionReassignmentRevert: the merged list without the added replicas (order kept)
    assert (p.replicas, p.adding, p.removing, p.isr, p.leader) == ((2, 3, 1), (), (), (1, 2, 3), 1)


def test_a_new_target_replaces_the_ongoing_one():
    """Kafka computes the new move from the current (merged) replica list: an added replica not in the
    new target is now being removed."""
    c, log, epochs = cluster(5)
    _topic(c, [1, 2, 3])
    c.alter_reassignment("t", 0, [4, 2, 3])
    c.alter_reassignment("t", 0, [5, 2, 3])
    p = c.image.partition("t", 0)
    assert (p.replicas, p.adding, p.removing) == ((5, 2, 3, 1, 4), (5,), (1, 4))


def test_invalid_targets_are_refused_as_kafka_does():
    c, log, epochs = cluster(3)
    _topic(c, [1, 2])
    assert _error(c.alter_reassignment, "nope", 0, [1]) == UNKNOWN_TOPIC_OR_PARTITION
    assert _error(c.alter_reassignment, "t", 7, [1]) == UNKNOWN_TOPIC_OR_PARTITION
    assert _error(c.alter_reassignment, "t", 0, []) == INVALID_REPLICA_ASSIGNMENT
    assert _error(c.alter_reassignment, "t", 0, [1, 9]) == INVALID_REPLICA_ASSIGNMENT  # not registered
    assert _error(c.alter_reassignment, "t", 0, [2, 2]) == INVALID_REPLICA_ASSIGNMENT
    assert _error(c.alter_reassignment, "t", 0, [1, 2, 3], False) == INVALID_REPLICATION_FACTOR  # KIP-860
    c.alter_reassignment("t", 0, [2, 3], False)  # same factor: allowed
    assert c.image.partition("t", 0).replicas[:2] == (2, 3)


def test_a_revert_that_needs_an_unclean_election_is_refused():
    """Only added replicas left in the ISR (the original one fenced): cancelling is refused, and the
    move completes once every target replica is in sync."""
    c, log, epochs = cluster(3)
    tb = _topic(c, [1])
    c.alter_reassignment("t", 0, [2, 3])
    _join_isr(c, epochs, tb, 2)
    p = c.image.partition("t", 0)
    assert (p.replicas, p.adding, p.removing, p.isr) == ((2, 3, 1), (2, 3), (1,), (1, 2))  # 3 not in sync yet
    c.fence(1)
    q = c.image.partition("t", 0)
    assert (q.isr, q.leader) == ((2,), 2)  # an adding replica in the ISR may lead
    assert _error(c.alter_reassignment, "t", 0, None) == INVALID_REPLICA_ASSIGNMENT
    done = _join_isr(c, epochs, tb, 3)
    assert (done.replicas, done.isr, done.leader, done.reassigning) == ((2, 3), (2, 3), 2, False)


def test_reassignment_state_survives_a_snapshot():
    c, log, epochs = cluster(4)
    _topic(c, [1, 2, 3])
    c.alter_reassignment("t", 0, [4, 2, 3])
    image = log.replay()
    again = MetadataImage.from_json(json.loads(json.dumps(image.to_json())))
    assert again.partition("t", 0) == image.partition("t", 0) and again.partition("t", 0).adding == (4,)
    old = image.to_json()  # a snapshot written before reassignments existed has 6 fields per partition
    old["topics"][0][3] = [part[:6] for part in old["topics"][0][3]]
    assert MetadataImage.from_json(old).partition("t", 0).adding == ()
