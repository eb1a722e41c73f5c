"""The metadata image, replica placement and the controller's decisions (metadata/), pure."""
from __future__ import annotations

import random
import uuid

import pytest

from minikafka.metadata import records as r
from minikafka.metadata.controller import (DUPLICATE_BROKER_REGISTRATION, FENCED_LEADER_EPOCH,
                                                      INELIGIBLE_REPLICA, INVALID_REPLICATION_FACTOR,
                                                      INVALID_UPDATE_VERSION, STALE_BROKER_EPOCH, Controller,
                                                      ControllerConfig, ControllerError)
from minikafka.metadata.image import NO_LEADER, MetadataImage
from minikafka.metadata.placement import PlacementError, UsableBroker, place


class Log:
    """A fake quorum log: records get consecutive offsets; `commit` applies them to a follower's image."""

    def __init__(self) -> None:
        self.entries: list[dict] = []

    def propose(self, record: dict) -> int:
        self.entries.append(record)
        return len(self.entries) - 1

    def replay(self) -> MetadataImage:
        image = MetadataImage()
        for offset, rec in enumerate(self.entries):
            image.apply(rec, offset)
        return image


def cluster(n: int = 3, session_ms: int = 1000):
    log = Log()
    c = Controller(MetadataImage(), log.propose, ControllerConfig(session_ms), 0, random.Random(1))
    epochs = {}
    for b in range(1, n + 1):
        epochs[b] = c.register_broker(b, f"inc-{b}", [("PLAINTEXT", "h", 9000 + b, "PLAINTEXT")], None, 0,
                                       len(log.entries))
        c.heartbeat(b, epochs[b], epochs[b], False, False, len(log.entries), 0)
    return c, log, epochs


def test_placement_stripes_leaders_and_replicas_over_brokers():
    brokers = [UsableBroker(b) for b in (1, 2, 3)]
    for seed in range(20):
        plan = place(brokers, 6, 3, rng=random.Random(seed))
        assert sorted(plan) == list(range(6))
        assert all(sorted(replicas) == [1, 2, 3] for replicas in plan.values())
        assert sorted(v[0] for v in plan.values()) == [1, 1, 2, 2, 3, 3]  # leaders spread evenly
    plan = place([UsableBroker(b) for b in range(5)], 10, 2, start_partition=4, rng=random.Random(1))
    assert sorted(plan) == list(range(4, 14)) and all(len(set(v)) == 2 for v in plan.values())
    assert sorted(v[0] for v in plan.values()) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_placement_is_rack_aware():
    """Racks a (1, 2, 3) and b (4, 5, 6): every RF-2 partition has a replica in each rack, and the
    leaders alternate between the racks; a third rack with one broker gets a replica of every RF-3 one."""
    brokers = [UsableBroker(b, "a") for b in (1, 2, 3)] + [UsableBroker(b, "b") for b in (4, 5, 6)]
    for seed in range(20):
        plan = place(brokers, 12, 2, rng=random.Random(seed))
        assert all({r <= 3 for r in v} == {True, False} for v in plan.values()), plan
        assert sum(v[0] <= 3 for v in plan.values()) == 6
    racked = brokers + [UsableBroker(7, "c")]
    for seed in range(20):
        plan = place(racked, 7, 3, rng=random.Random(seed))
        assert all(7 in v and any(r <= 3 for r in v) and any(4 <= r <= 6 for r in v) for v in plan.values())


def test_placement_uses_fenced_brokers_as_followers_only():
    """Kafka places replicas on a registered but fenced broker (it rejoins the ISR when back), never
    the leader; with every broker fenced, or RF above the registered brokers, nothing is placed."""
    brokers = [UsableBroker(1), UsableBroker(2), UsableBroker(3, fenced=True)]
    for seed in range(20):
        plan = place(brokers, 6, 3, rng=random.Random(seed))
        assert all(v[0] != 3 and sorted(v) == [1, 2, 3] for v in plan.values())
    with pytest.raises(PlacementError, match="only 3 broker"):
        place(brokers, 1, 4)
    with pytest.raises(PlacementError, match="All brokers are currently fenced"):
        place([UsableBroker(1, fenced=True)], 1, 1)
    with pytest.raises(PlacementError, match="must be positive"):
        place(brokers, 1, 0)


def test_image_applies_records_and_bumps_epochs():
    image = MetadataImage()
    tid = str(uuid.uuid4())
    image.apply(r.register_broker(1, 0, "a", [("PLAINTEXT", "h", 1, "PLAINTEXT")], "r1"), 0)
    image.apply(r.topic("t", tid, {"cleanup.policy": "compact"}), 1)
    changed, _ = image.apply(r.partition(tid, 0, [1, 2, 3], [1, 2, 3], 1), 2)
    assert changed == [("t", 0)]
    image.apply(r.partition_change(tid, 0, isr=[1, 2]), 3)
    p = image.partition("t", 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)
    image.apply(r.partition_change(tid, 0, leader=2, isr=[2]), 4)
    p = image.partition("t", 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((2,), 2, 1, 2)
    assert image.brokers[1].fenced and image.brokers[1].endpoints["PLAINTEXT"] == ("h", 1, "PLAINTEXT")
    copy = image.copy()
    _, deleted = image.apply(r.remove_topic(tid), 5)
    assert deleted == ["t"] and image.partition("t", 0) is None and copy.partition("t", 0) is not None
    assert image.offset == 5


def test_registration_heartbeat_and_fencing_move_leaders_within_the_isr():
    c, log, epochs = cluster()
    assert all(not b.fenced for b in c.image.brokers.values())
    tid, plan = c.create_topic("t", 3, 3, {})
    assert all(len(set(v)) == 3 for v in plan.values())
    img = c.image
    victim = img.partition("t", 0).leader
    # everyone heartbeats but the victim; its session expires
    for b in epochs:
        if b != victim:
            c.heartbeat(b, epochs[b], 100, False, False, 100, 900)
    assert c.tick(1500) == [victim]
    for p in img.topics["t"].partitions.values():
        assert victim not in p.isr and p.leader in p.isr and p.leader != victim
    assert log.replay().topics["t"].partitions == img.topics["t"].partitions  # followers agree
    # the victim comes back: registers (new epoch), catches up, is unfenced; not in the ISR until the leader asks
    epoch = c.register_broker(victim, "inc-new", [("PLAINTEXT", "h", 1, "PLAINTEXT")], None, 2000, len(log.entries))
    assert c.heartbeat(victim, epochs[victim], 0, False, False, 0, 2000).error == STALE_BROKER_EPOCH
    hb = c.heartbeat(victim, epoch, epoch, False, False, epoch + 1, 2000)
    assert not hb.is_fenced and hb.is_caught_up


def test_a_live_session_refuses_another_incarnation():
    c, log, epochs = cluster()
    with pytest.raises(ControllerError) as e:
        c.register_broker(1, "other", [], None, 10, len(log.entries))
    assert e.value.code == DUPLICATE_BROKER_REGISTRATION


def test_last_isr_member_stays_leaderless_then_leads_again():
    c, log, epochs = cluster()
    c.create_topic("one", 1, 1, {})
    p = c.image.partition("one", 0)
    c.fence(p.leader)
    q = c.image.partition("one", 0)
    assert q.leader == NO_LEADER and q.isr == p.isr and q.leader_epoch == p.leader_epoch + 1
    epoch = c.register_broker(p.leader, "again", [], None, 0, len(log.entries))
    c.heartbeat(p.leader, epoch, epoch, False, False, epoch + 1, 0)
    assert c.image.partition("one", 0).leader == p.leader


def test_alter_partition_checks_epochs_and_eligibility():
    c, log, epochs = cluster()
    tid, _ = c.create_topic("t", 1, 3, {})
    p = c.image.partition("t", 0)
    follower = [b for b in p.replicas if b != p.leader][0]
    shrunk = [(b, epochs[b]) for b in p.isr if b != follower]
    tb = uuid.UUID(tid).bytes

    def err(**kw):
        args = dict(broker_id=p.leader, topic_id=tb, partition=0, leader_epoch=p.leader_epoch,
                    partition_epoch=p.partition_epoch, new_isr=shrunk) | kw
        with pytest.raises(ControllerError) as e:
            c.alter_partition(**args)
        return e.value.code
    assert err(leader_epoch=p.leader_epoch + 1) == FENCED_LEADER_EPOCH
    assert err(partition_epoch=p.partition_epoch + 5) == INVALID_UPDATE_VERSION
    assert err(new_isr=[*shrunk, (99, 0)]) == INELIGIBLE_REPLICA
    q = c.alter_partition(p.leader, tb, 0, p.leader_epoch, p.partition_epoch, shrunk)
    assert follower not in q.isr and q.partition_epoch == p.partition_epoch + 1 and q.leader_epoch == p.leader_epoch
    assert err(partition_epoch=p.partition_epoch) == INVALID_UPDATE_VERSION  # stale update refused


def test_rf_above_live_brokers_and_producer_id_blocks():
    c, log, epochs = cluster(2)
    with pytest.raises(ControllerError) as e:
        c.create_topic("t", 1, 3, {})
    assert e.value.code == INVALID_REPLICATION_FACTOR
    assert c.allocate_producer_ids(1, epochs[1]) == (0, 1000)
    assert c.allocate_producer_ids(2, epochs[2]) == (1000, 1000)
    assert log.replay().next_producer_id == 2000


def test_controlled_shutdown_moves_leadership_first():
    c, log, epochs = cluster()
    c.create_topic("t", 3, 3, {})
    b = c.image.partition("t", 0).leader
    hb = c.heartbeat(b, epochs[b], 100, False, True, 100, 0)
    assert hb.should_shut_down and hb.is_fenced  # nothing led by it any more: fenced (SHUTDOWN_NOW)
    assert all(p.leader != b and b not in p.isr for p in c.image.topics["t"].partitions.values())
    # the next process of that broker registers at once (no live session of the old one)
    assert c.register_broker(b, "next", [], None, 1, len(log.entries)) > epochs[b]


def test_preferred_election():
    c, log, epochs = cluster()
    c.create_topic("t", 1, 3, {})
    p = c.image.partition("t", 0)
    assert c.elect_preferred("t", 0) == 84
    c.fence(p.replicas[0])
    epoch = c.register_broker(p.replicas[0], "x", [], None, 0, len(log.entries))
    c.heartbeat(p.replicas[0], epoch, epoch, False, False, epoch + 1, 0)
    assert c.elect_preferred("t", 0) == 80  # not back in the ISR yet
    q = c.image.partition("t", 0)
    tb = q.topic_id
    c.alter_partition(q.leader, tb, 0, q.leader_epoch, q.partition_epoch,
                      [(b, c.image.brokers[b].epoch) for b in (*q.isr, p.replicas[0])])
    assert c.elect_preferred("t", 0) == 0 and c.image.partition("t", 0).leader == p.replicas[0]


def test_a_repeated_registration_of_a_live_broker_in_isrs_gets_the_offset_of_its_record():
    c, log, epochs = cluster()
    c.create_topic("t", 2, 3, {})
    # the same incarnation registers again (its answer was lost): out of the ISRs first, then registered
    epoch = c.register_broker(1, "inc-1", [], None, 10, len(log.entries))
    assert log.entries[epoch]["type"] == r.REGISTER_BROKER and log.entries[epoch]["brokerEpoch"] == epoch
    assert all(1 not in p.isr for p in c.image.topics["t"].partitions.values())


def test_client_views_of_brokers_and_partitions():
    from minikafka.broker.cluster.views import brokers_for_clients, leader_endpoint, partition_view
    c, log, epochs = cluster()
    c.create_topic("t", 1, 3, {})
    img = log.replay()
    p = img.partition("t", 0)
    assert partition_view(img, "t", 0, "PLAINTEXT") == (0, p.leader, 0, list(p.replicas), list(p.isr), [], [], [])
    assert leader_endpoint(img, "t", 0, "PLAINTEXT") == (p.leader, "h", 9000 + p.leader)
    assert partition_view(img, "t", 0, "SSL").error == 5  # the leader has no endpoint there: LEADER_NOT_AVAILABLE
    c.fence(p.leader)
    img = log.replay()
    view = partition_view(img, "t", 0, "PLAINTEXT")
    assert view.offline == [p.leader] and view.leader != p.leader and view.leader_epoch == 1
    assert [b[0] for b in brokers_for_clients(img, "PLAINTEXT", 1, ("me", 1))] == sorted(set(epochs) - {p.leader})
    assert [b[0] for b in brokers_for_clients(MetadataImage(), "PLAINTEXT", 7, ("me", 1))] == [7]  # not registered yet


def test_image_snapshot_round_trip():
    """KIP-630: the image serialized into a snapshot (JSON) and read back is the same image."""
    import json
    c, log, _epochs = cluster()
    c.create_topic("t", 3, 3, {"cleanup.policy": "compact"})
    c.create_topic("u", 1, 1, {})
    image = log.replay()
    again = MetadataImage.from_json(json.loads(json.dumps(image.to_json())))
    assert again.brokers == image.brokers and again.offset == image.offset
    assert again.next_producer_id == image.next_producer_id and again.broker_configs == image.broker_configs
    assert {n: (t.topic_id, t.configs, t.partitions) for n, t in again.topics.items()} == \
        {n: (t.topic_id, t.configs, t.partitions) for n, t in image.topics.items()}
    assert again.topic_by_id(image.topics["t"].topic_id).name == "t"


def test_image_snapshot_carries_security_state():
    """ACLs, SCRAM credentials, the bootstrap flag and the security version survive a snapshot: a node
    starting from one enforces what the log said (seccl x snapshots)."""
    import json
    image = MetadataImage()
    image.apply(r.access_control_entry("a1", (2, "orders", 3, "User:alice", "*", 3, 3)), 1)
    image.apply(r.user_scram_credential("alice", "SCRAM-SHA-512", "c2FsdA==", "c3RvcmVk", "c2VydmVy", 4096), 2)
    image.apply(r.bootstrap_done(), 3)
    again = MetadataImage.from_json(json.loads(json.dumps(image.to_json())))
    assert again.acls == image.acls and again.scram == image.scram
    assert again.bootstrapped and again.security_version == image.security_version > 0
