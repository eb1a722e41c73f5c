"""Eligible leader replicas (KIP-966), pure: metadata/partition_change.py's elr_change (Kafka's
PartitionChangeBuilder with ELR enabled) and the controller using it (fencing, AlterPartition,
unfencing, clean and unclean shutdowns, min.insync.replicas changes, unclean election), checked against
what Kafka 4.3's controller writes for the same steps."""
from __future__ import annotations

import random

from minikafka.metadata import records as r
from minikafka.metadata.controller import NONE, Controller, ControllerConfig
from minikafka.metadata.image import NO_LEADER, MetadataImage
from minikafka.metadata.partition_change import ElrChange, effective_min_isr, elr_change

from .test_cluster_metadata import Log

ALIVE = {1, 2, 3}


def change(isr, target, *, elr=(), lke=(), leader=1, min_isr=2, alive=ALIVE, replicas=(1, 2, 3), **kw):
    return elr_change(replicas=replicas, isr=isr, elr=elr, last_known_elr=lke, leader=leader, target_isr=target,
                      min_isr=min_isr, acceptable=lambda b: b in alive, **kw)


# -- the pure partition change ---------------------------------------------------------------------------
def test_isr_at_min_isr_keeps_elr_empty():
    assert change((1, 2, 3), [1, 2]) == ElrChange(isr=(1, 2))


def test_isr_below_min_isr_moves_the_removed_members_to_the_elr():
    assert change((1, 2), [1], alive={1, 3}) == ElrChange(isr=(1,), elr=(2,))


def test_empty_isr_keeps_every_former_member_in_the_elr_and_remembers_the_last_leader():
    ch = change((1,), [], elr=(2,), alive={3})
    assert ch == ElrChange(leader=NO_LEADER, isr=(), elr=(1, 2), last_known_elr=(1,))


def test_leader_is_elected_from_the_elr_when_the_isr_is_empty():
    ch = change((), [], elr=(1, 2), lke=(1,), leader=NO_LEADER, alive={2, 3})
    assert ch == ElrChange(leader=2, isr=(2,), elr=(1,), last_known_elr=())


def test_isr_back_at_min_isr_clears_the_elr():
    assert change((1,), [1, 2], elr=(2, 3)) == ElrChange(isr=(1, 2), elr=())


def test_unclean_shutdown_leaves_the_elr():
    assert change((), [], elr=(1, 2), lke=(1,), leader=NO_LEADER, alive={3},
                  unclean_shutdown=(2,)) == ElrChange(elr=(1,))


def test_last_known_leader_leads_when_isr_and_elr_are_empty():
    ch = change((), [], lke=(1,), leader=NO_LEADER, alive={1})
    assert ch == ElrChange(leader=1, isr=(1,), last_known_elr=(), unclean=True)
    assert change((), [], lke=(1,), leader=NO_LEADER, alive={2}) == ElrChange()  # not alive: nobody


def test_unclean_election_clears_elr():
    ch = change((), [], elr=(1,), lke=(1,), leader=NO_LEADER, alive={3}, unclean_allowed=True)
    assert ch == ElrChange(leader=3, isr=(3,), elr=(), last_known_elr=(), unclean=True)


def test_effective_min_isr_is_capped_by_the_replication_factor():
    assert effective_min_isr(2, 3) == 2 and effective_min_isr(3, 1) == 1 and effective_min_isr(1, 3) == 1


# -- the controller ---------------------------------------------------------------------------------------
def elr_cluster(n: int = 3, min_isr: int = 2):
    log = Log()
    c = Controller(MetadataImage(), log.propose,
                   ControllerConfig(1000, min_insync_replicas=min_isr, elr_enabled=lambda: True), 0, random.Random(1))
    epochs = {}
    for b in range(1, n + 1):
        epochs[b] = c.register_broker(b, f"inc-{b}", [("PLAINTEXT", "h", 9000 + b, "PLAINTEXT")], None, 0,
                                       len(log.entries))
        c.heartbeat(b, epochs[b], epochs[b], False, False, len(log.entries), 0)
    return c, log, epochs


def state(c, name="t"):
    p = c.image.partition(name, 0)
    return p.leader, p.isr, p.elr, p.last_known_elr


def test_fencing_below_min_isr_then_election_from_the_elr():
    c, log, epochs = elr_cluster()
    c.create_topic("t", 1, 3, {}, assignments={0: [1, 2, 3]})
    c.fence(3)
    assert state(c) == (1, (1, 2), (), ())
    c.fence(2)
    assert state(c) == (1, (1,), (2,), ())
    c.fence(1)
    assert state(c) == (NO_LEADER, (), (1, 2), (1,))
    # 2 restarts after a clean shutdown: stays eligible and leads once unfenced
    epochs[2] = c.register_broker(2, "inc-2b", [("PLAINTEXT", "h", 9002, "PLAINTEXT")], None, 0, len(log.entries),
                                  previous_broker_epoch=epochs[2])
    assert state(c) == (NO_LEADER, (), (1, 2), (1,))
    c.heartbeat(2, epochs[2], 10**6, False, False, 10**6, 0)
    assert state(c) == (2, (2,), (1,), ())
    assert log.replay().partition("t", 0) == c.image.partition("t", 0)


def test_unclean_restart_leaves_the_elr():
    c, log, epochs = elr_cluster()
    c.create_topic("t", 1, 3, {}, assignments={0: [1, 2, 3]})
    for b in (3, 2, 1):
        c.fence(b)
    epochs[2] = c.register_broker(2, "inc-2b", [("PLAINTEXT", "h", 9002, "PLAINTEXT")], None, 0, len(log.entries))
    assert state(c) == (NO_LEADER, (), (1,), (1,))
    c.heartbeat(2, epochs[2], 10**6, False, False, 10**6, 0)
    assert state(c)[0] == NO_LEADER  # 2 may hold less than what was acknowledged: it does not lead


def test_alter_partition_shrink_and_expand():
    c, log, epochs = elr_cluster()
    c.create_topic("t", 1, 3, {}, assignments={0: [1, 2, 3]})
    p = c.image.partition("t", 0)
    p = c.alter_partition(1, p.topic_id, 0, p.leader_epoch, p.partition_epoch, [(1, -1)])
    assert (p.isr, p.elr) == ((1,), (2, 3))
    p = c.alter_partition(1, p.topic_id, 0, p.leader_epoch, p.partition_epoch, [(1, -1), (3, -1)])
    assert (p.isr, p.elr) == ((1, 3), ())


def test_min_isr_change_clears_the_elr():
    c, log, epochs = elr_cluster()
    c.create_topic("t", 1, 3, {}, assignments={0: [1, 2, 3]})
    c.fence(3)
    c.fence(2)
    assert state(c)[2] == (2,)
    c.set_topic_configs("t", {"min.insync.replicas": "1"})
    assert state(c)[2:] == ((), ())
    c.fence(1)
    assert state(c) == (NO_LEADER, (), (1,), (1,))
    c.set_broker_configs("", {"min.insync.replicas": "3"})
    assert state(c) == (NO_LEADER, (), (), ())


def test_without_elr_the_last_isr_member_stays():
    log = Log()
    c = Controller(MetadataImage(), log.propose, ControllerConfig(1000, min_insync_replicas=2), 0, random.Random(1))
    for b in (1, 2):
        e = c.register_broker(b, f"inc-{b}", [("PLAINTEXT", "h", 9000 + b, "PLAINTEXT")], None, 0, len(log.entries))
        c.heartbeat(b, e, e, False, False, len(log.entries), 0)
    c.create_topic("t", 1, 2, {}, assignments={0: [1, 2]})
    c.fence(2)
    c.fence(1)
    assert state(c) == (NO_LEADER, (1,), (), ())


def test_elect_leaders_unclean_uses_the_elr_first():
    c, log, epochs = elr_cluster()
    c.create_topic("t", 1, 3, {}, assignments={0: [1, 2, 3]})
    for b in (3, 2, 1):
        c.fence(b)
    c._emit(r.broker_state(3, fenced=False))  # 3 alive but never eligible
    assert c.elect_unclean("t", 0) == NONE
    assert state(c) == (3, (3,), (), ())


def test_feature_level_changes_write_kafkas_safety_and_clear_records():
    """ELR turned on: the cluster-wide min.insync.replicas (the static value unless set) and no broker-level one;
    turned off: every ELR and LastKnownElr cleared."""
    c, log, epochs = elr_cluster()
    c._emit(r.config(r.BROKER_RESOURCE, "2", "min.insync.replicas", "3"))
    c.set_feature_levels({"eligible.leader.replicas.version": 1})
    assert c.image.broker_configs[""] == {"min.insync.replicas": "2"}
    assert "min.insync.replicas" not in c.image.broker_configs.get("2", {})
    c.create_topic("t", 1, 3, {}, assignments={0: [1, 2, 3]})
    for b in (3, 2, 1):
        c.fence(b)
    assert state(c)[2:] == ((1, 2), (1,))
    c.set_feature_levels({"eligible.leader.replicas.version": 0})
    assert state(c) == (NO_LEADER, (), (), ())
