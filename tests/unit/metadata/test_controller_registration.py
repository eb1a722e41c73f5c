"""KIP-919 controller registrations: metadata/records.py's RegisterController record (Kafka's
RegisterControllerRecord v0), the image's `controllers` (the last registration of an id wins, carried by
copies and snapshots), the controller's decision (metadata/controller.py) and the UpdateFeatures check
over the registered controllers (broker/cluster/controller_registration.py)."""
from __future__ import annotations

import json

from minikafka.broker.cluster.controller_registration import (reason_controllers_do_not_support,
                                                              supported_features)
from minikafka.broker.config.features import SUPPORTED
from minikafka.metadata import records as r
from minikafka.metadata.image import ControllerInfo, MetadataImage
from tests.unit.metadata.test_cluster_metadata import cluster

FEATURES = [("metadata.version", 7, 30), ("group.version", 0, 1), ("kraft.version", 0, 1)]


def _reg(cid: int, inc: str, port: int, features=FEATURES, listeners=("CONTROLLER",)):
    return r.register_controller(cid, inc, [(name, "127.0.0.1", port + i, "PLAINTEXT")
                                            for i, name in enumerate(listeners)], features)


def test_record_fields_as_kafka_names_them():
    rec = _reg(2, "inc-2", 9093, listeners=("CONTROLLER", "SSL_CONTROLLER"))
    assert rec == {"type": "RegisterController", "controllerId": 2, "incarnationId": "inc-2", "zkMigrationReady": False,
                   "endPoints": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9093, "securityProtocol": "PLAINTEXT"},
                                 {"name": "SSL_CONTROLLER", "host": "127.0.0.1", "port": 9094,
                                  "securityProtocol": "PLAINTEXT"}],
                   "features": [{"name": "metadata.version", "minSupportedVersion": 7, "maxSupportedVersion": 30},
                                {"name": "group.version", "minSupportedVersion": 0, "maxSupportedVersion": 1},
                                {"name": "kraft.version", "minSupportedVersion": 0, "maxSupportedVersion": 1}]}
    assert json.loads(json.dumps(rec)) == rec  # the metadata log stores JSON


def test_image_keeps_the_last_registration_of_each_controller():
    image = MetadataImage()
    image.apply(_reg(1, "a", 9001), 0)
    image.apply(_reg(2, "b", 9002), 1)
    image.apply(_reg(1, "c", 9101), 2)  # controller 1 restarted on another port
    assert image.controllers == {
        1: ControllerInfo(1, "c", {"CONTROLLER": ("127.0.0.1", 9101, "PLAINTEXT")},
                          {"metadata.version": (7, 30), "group.version": (0, 1), "kraft.version": (0, 1)}),
        2: ControllerInfo(2, "b", {"CONTROLLER": ("127.0.0.1", 9002, "PLAINTEXT")},
                          {"metadata.version": (7, 30), "group.version": (0, 1), "kraft.version": (0, 1)})}
    assert image.offset == 2 and not image.brokers  # a controller registration registers no broker


def test_copy_and_snapshot_carry_the_registrations():
    image = MetadataImage()
    image.apply(_reg(1, "a", 9001, listeners=("CONTROLLER", "OTHER")), 0)
    image.apply(_reg(3, "b", 9003, features=[]), 1)
    copied = image.copy()
    image.apply(_reg(3, "later", 1), 2)
    assert copied.controllers[3].incarnation_id == "b"  # independent of the original
    restored = MetadataImage.from_json(json.loads(json.dumps(copied.to_json())))
    assert restored.controllers == copied.controllers
    assert restored.controllers[1].endpoints == {"CONTROLLER": ("127.0.0.1", 9001, "PLAINTEXT"),
                                                 "OTHER": ("127.0.0.1", 9002, "PLAINTEXT")}
    old = copied.to_json()
    del old["controllers"]  # a snapshot written before KIP-919
    assert MetadataImage.from_json(old).controllers == {}


def test_the_active_controller_appends_the_registration_as_sent():
    c, log, _epochs = cluster()
    c.register_controller(2, "inc", [("CONTROLLER", "h", 7, "SSL")], [("metadata.version", 7, 7)])
    assert log.entries[-1]["type"] == "RegisterController" and c.image.controllers[2].endpoints == {
        "CONTROLLER": ("h", 7, "SSL")}
    assert log.replay().controllers == c.image.controllers  # every node replaying the log agrees


def test_update_features_reason_names_the_first_controller_that_cannot_take_the_level():
    image = MetadataImage()
    image.apply(_reg(1, "a", 1), 0)
    image.apply(_reg(2, "b", 2, features=[("metadata.version", 7, 30), ("group.version", 0, 0)]), 1)
    image.apply(_reg(3, "c", 3, features=[("metadata.version", 7, 20), ("transaction.version", 1, 32767)]), 2)
    ctl = image.controllers

    def why(feature, level, own=1, voters=(1, 2, 3)):
        return reason_controllers_do_not_support(ctl, own, voters, feature, level)
    assert why("metadata.version", 20) is None
    assert why("metadata.version", 25) == "Controller 3 only supports versions 7-20"
    assert why("group.version", 1) == "Controller 2 does not support this feature."  # max 0
    assert why("group.version", 0) is None  # level 0 (disabled) is within 0-0
    assert why("transaction.version", 2) == "Controller 2 does not support this feature."  # absent: 0-0
    assert why("group.version", 1, own=2) == "Controller 3 does not support this feature."  # itself: checked before
    assert reason_controllers_do_not_support({1: ctl[1]}, 1, (1, 2), "metadata.version", 30) == \
        "controller 2 has not registered, and may not support this feature"
    assert reason_controllers_do_not_support({1: ctl[1], 3: ctl[3]}, 1, (), "transaction.version", 5) is None  # 1+


def test_a_controller_registers_what_api_versions_reports():
    static = dict((n, (lo, hi)) for n, lo, hi in supported_features(0))
    # a static quorum's controller supports kraft.version 1 too: it may be upgraded (KAFKA-16538)
    assert static == {**{s.name: (s.min_version, s.max_version) for s in SUPPORTED.values()}, "kraft.version": (0, 1)}
    assert dict((n, (lo, hi)) for n, lo, hi in supported_features(1))["kraft.version"] == (0, 1)
