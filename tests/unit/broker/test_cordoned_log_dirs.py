"""broker/config/core.py: cordoned.log.dirs (KIP-1066) parsed with Kafka's checks, on a single node and on a
node of a multi-node cluster (its heartbeats tell the controller); the controller's side: the broker
registration keeps the cordoned dir ids and placement leaves out brokers whose every dir is cordoned."""
from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.broker.config.core import BrokerConfig, ConfigError, parse_cordoned_log_dirs


def test_parse():
    assert parse_cordoned_log_dirs("", "/a,/b") == frozenset()
    assert parse_cordoned_log_dirs("*", "/a, /b") == {Path("/a"), Path("/b")}
    assert parse_cordoned_log_dirs(" /b ", "/a,/b") == {Path("/b")}
    with pytest.raises(ConfigError, match="When cordoned.log.dirs is set to \\*, it must not contain other values"):
        parse_cordoned_log_dirs("*,/a", "/a")
    with pytest.raises(ConfigError, match="Missing entries : /c"):
        parse_cordoned_log_dirs("/a,/c", "/a,/b")


def test_all_cordoned(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    one = BrokerConfig({"log.dirs": f"{a},{b}", "cordoned.log.dirs": str(a)})
    assert one.cordoned_log_dirs == {a} and not one.all_log_dirs_cordoned
    assert BrokerConfig({"log.dirs": f"{a},{b}", "cordoned.log.dirs": "*"}).all_log_dirs_cordoned
    assert not BrokerConfig({"log.dirs": str(a)}).all_log_dirs_cordoned


def test_a_cluster_node_accepts_it(tmp_path):
    cluster = {"log.dirs": str(tmp_path), "node.id": "1", "process.roles": "broker,controller",
               "controller.listener.names": "CONTROLLER",
               "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
               "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
               "controller.quorum.voters": "1@127.0.0.1:19001,2@127.0.0.1:19002,3@127.0.0.1:19003"}
    assert BrokerConfig({**cluster, "cordoned.log.dirs": "*"}).all_log_dirs_cordoned


# -- the controller's side (metadata/): registration, heartbeats, placement --------------------------------
def _controller(brokers: int = 3):
    from minikafka.metadata.controller import Controller
    from minikafka.metadata.image import MetadataImage
    image = MetadataImage()
    offsets = iter(range(1, 10_000))
    c = Controller(image, lambda rec: next(offsets))
    for b in range(1, brokers + 1):
        epoch = c.register_broker(b, f"inc-{b}", [("PLAINTEXT", "h", 9000 + b, "PLAINTEXT")], None, 0,
                                  c.emitted + 1, log_dirs=[f"dir-{b}a", f"dir-{b}b"])
        assert c.heartbeat(b, epoch, epoch + 1, False, False, epoch + 2, 0, cordoned_log_dirs=[]).error == 0
    return c, image


def test_broker_has_uncordoned_dirs():
    from minikafka.metadata.image import BrokerInfo
    b = BrokerInfo(1, 1, "i", {}, None, log_dirs=("x", "y"))
    assert b.has_uncordoned_dirs  # nothing cordoned known yet (null before the first heartbeat)
    assert BrokerInfo(1, 1, "i", {}, None, log_dirs=("x", "y"), cordoned_log_dirs=("x",)).has_uncordoned_dirs
    assert not BrokerInfo(1, 1, "i", {}, None, log_dirs=("x", "y"), cordoned_log_dirs=("y", "x")).has_uncordoned_dirs
    assert BrokerInfo(1, 1, "i", {}, None, cordoned_log_dirs=("x",)).has_uncordoned_dirs  # no dirs registered


def test_heartbeat_records_cordoned_dirs_and_placement_skips_the_broker():
    from minikafka.metadata.controller import ControllerError
    c, image = _controller()
    assert image.brokers[2].cordoned_log_dirs == ()
    before = c.emitted
    c.heartbeat(2, image.brokers[2].epoch, 100, False, False, 100, 0, cordoned_log_dirs=["dir-2a"])
    assert c.emitted == before + 1 and image.brokers[2].cordoned_log_dirs == ("dir-2a",)
    c.heartbeat(2, image.brokers[2].epoch, 100, False, False, 100, 0, cordoned_log_dirs=["dir-2a"])
    c.heartbeat(2, image.brokers[2].epoch, 100, False, False, 100, 0)  # no CordonedLogDirs: no change
    assert c.emitted == before + 1 and [b.id for b in image.usable_brokers()] == [1, 2, 3]
    c.heartbeat(2, image.brokers[2].epoch, 100, False, False, 100, 0, cordoned_log_dirs=["dir-2b", "dir-2a"])
    assert not image.brokers[2].fenced and [b.id for b in image.usable_brokers()] == [1, 3]
    _, plan = c.create_topic("t", 12, 2, {})
    assert all(2 not in replicas for replicas in plan.values())
    with pytest.raises(ControllerError) as exc:
        c.create_topic("u", 1, 3, {})
    assert exc.value.code == 38 and exc.value.message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because "
        "only 2 broker(s) are registered or some brokers have all their log directories cordoned.")
    for b in (1, 3):
        c.heartbeat(b, image.brokers[b].epoch, 100, False, False, 100, 0, cordoned_log_dirs=[f"dir-{b}a", f"dir-{b}b"])
    for create in (lambda: c.create_topic("v", 1, 1, {}), lambda: c.create_partitions("t", 13)):
        with pytest.raises(ControllerError) as exc:
            create()
        assert exc.value.code == 38 and exc.value.message.endswith(
            "All brokers are currently fenced, or have all their log directories cordoned.")
    c.heartbeat(2, image.brokers[2].epoch, 100, False, False, 100, 0, cordoned_log_dirs=[])
    assert [b.id for b in image.usable_brokers()] == [2]
    _, plan = c.create_topic("w", 3, 1, {})
    assert plan == {0: [2], 1: [2], 2: [2]}


def test_cordoned_dirs_survive_a_snapshot():
    from minikafka.metadata.image import MetadataImage
    c, image = _controller(2)
    c.heartbeat(1, image.brokers[1].epoch, 100, False, False, 100, 0, cordoned_log_dirs=["dir-1b", "dir-1a"])
    again = MetadataImage.from_json(image.to_json())
    assert again.brokers[1].log_dirs == ("dir-1a", "dir-1b") and again.brokers[1].cordoned_log_dirs == ("dir-1a", "dir-1b")
    assert again.brokers[2].cordoned_log_dirs == () and [b.id for b in again.usable_brokers()] == [2]
    old = image.to_json()
    old["brokers"] = [row[:7] for row in old["brokers"]]  # a snapshot from before KIP-1066
    assert [b.id for b in MetadataImage.from_json(old).usable_brokers()] == [1, 2]


def test_placement_messages_are_kafka_4_3s():
    from minikafka.metadata.placement import PlacementError, UsableBroker, place
    with pytest.raises(PlacementError, match="^All brokers are currently fenced, or have all their log directories "
                                             "cordoned.$"):
        place([], 1, 1)
    with pytest.raises(PlacementError, match="^The target replication factor of 3 cannot be reached because only 2 "
                                             "broker\\(s\\) are registered or some brokers have all their log "
                                             "directories cordoned.$"):
        place([UsableBroker(1), UsableBroker(2)], 1, 3)


def test_new_partitions_avoid_cordoned_dirs(tmp_path):
    from minikafka.storage.log_config import LogConfig
    from minikafka.storage.log_manager import LogManager
    a, b = tmp_path / "a", tmp_path / "b"
    logs = LogManager([a, b], LogConfig())
    cordoned = {a}
    logs.cordoned_dirs = lambda: frozenset(cordoned)
    assert {d.parent for d in logs.assign_dirs("t", range(4))} == {b}
    cordoned.add(b)  # every dir cordoned: the fewest partitions again
    assert [d.parent for d in logs.assign_dirs("u", range(2))] == [a, a]
    cordoned.clear()
    assert [d.parent for d in logs.assign_dirs("v", range(2))] == [a, a]
