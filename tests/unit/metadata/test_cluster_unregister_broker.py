"""metadata/controller.py: UnregisterBroker (`kafka-cluster unregister --id N`): a registered broker
leaves every ISR and leadership (as when fenced), then an UnregisterBroker record removes its
registration on every node; an id without a registration is BROKER_ID_NOT_REGISTERED with Kafka's message;
the broker may register again (a new epoch)."""
from __future__ import annotations

import pytest

from minikafka.metadata.controller import BROKER_ID_NOT_REGISTERED, ControllerError
from tests.unit.metadata.test_cluster_metadata import cluster


def test_unregister_takes_the_broker_out_then_removes_its_registration():
    c, log, epochs = cluster()
    c.create_topic("t", 3, 3, {})
    victim = c.image.partition("t", 0).leader
    c.unregister_broker(victim)
    assert victim not in c.image.brokers and sorted(c.image.brokers) == sorted(set(epochs) - {victim})
    for p in c.image.topics["t"].partitions.values():
        assert victim not in p.isr and p.leader != victim and p.leader in p.isr
    follower = log.replay()  # every node replaying the log agrees
    assert follower.brokers == c.image.brokers and follower.topics["t"].partitions == c.image.topics["t"].partitions
    assert log.entries[-1] == {"type": "UnregisterBroker", "brokerId": victim, "brokerEpoch": epochs[victim]}
    # its heartbeats find no registration; it registers again with a new epoch
    assert c.heartbeat(victim, epochs[victim], 0, False, False, 0, 0).error == BROKER_ID_NOT_REGISTERED
    epoch = c.register_broker(victim, "inc-again", [("PLAINTEXT", "h", 1, "PLAINTEXT")], None, 0, len(log.entries))
    assert epoch > epochs[victim] and victim in c.image.brokers


def test_unregister_of_an_unknown_id():
    c, log, _epochs = cluster()
    before = len(log.entries)
    for broker_id in (99, -1):
        with pytest.raises(ControllerError) as err:
            c.unregister_broker(broker_id)
        assert (err.value.code, err.value.message) == (
            BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")
    assert len(log.entries) == before


def test_a_stale_unregister_record_leaves_a_new_registration():
    """The record names the epoch it removes: replayed after a newer registration it changes nothing."""
    from minikafka.metadata import records as r
    from minikafka.metadata.image import MetadataImage
    image = MetadataImage()
    image.apply(r.register_broker(4, 0, "a", [("PLAINTEXT", "h", 1, "PLAINTEXT")], None), 0)
    image.apply(r.register_broker(4, 1, "b", [("PLAINTEXT", "h", 1, "PLAINTEXT")], None), 1)
    image.apply(r.unregister_broker(4, 0), 2)
    assert image.brokers[4].epoch == 1
    image.apply(r.unregister_broker(4, 1), 3)
    assert 4 not in image.brokers
