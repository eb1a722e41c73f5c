"""GROUP config records (Kafka's ConfigRecord with resourceType 32) in the metadata image and the
controller's decision about them (metadata/), pure; and a node's group config store following the
image (broker/cluster/security_sync.py, broker/config/group_configs.py)."""
from __future__ import annotations

import json
import random

import pytest

from minikafka.metadata import records as r
from minikafka.metadata.controller import Controller, ControllerError
from minikafka.metadata.image import MetadataImage
from minikafka.protocol.errors import INVALID_REQUEST


class Log:
    def __init__(self) -> None:
        self.entries: list[dict] = []

    def propose(self, record: dict) -> int:
        self.entries.append(json.loads(json.dumps(record)))  # as it travels: JSON
        return len(self.entries) - 1

    def replay(self) -> MetadataImage:
        image = MetadataImage()
        for offset, rec in enumerate(self.entries):
            image.apply(rec, offset)
        return image


def controller() -> tuple[Controller, Log]:
    log = Log()
    return Controller(MetadataImage(), log.propose, rng=random.Random(7)), log


def test_group_config_records_set_change_delete():
    c, log = controller()
    c.set_group_configs("sg", {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"})
    c.set_group_configs("cg", {"consumer.session.timeout.ms": "50000"})
    c.set_group_configs("sg", {"share.auto.offset.reset": "earliest"})  # one DELETE record, nothing else
    assert [(e["resourceType"], e["resourceName"], e["name"], e["value"]) for e in log.entries] == [
        (r.GROUP_RESOURCE, "sg", "share.auto.offset.reset", "earliest"),
        (r.GROUP_RESOURCE, "sg", "share.record.lock.duration.ms", "15000"),
        (r.GROUP_RESOURCE, "cg", "consumer.session.timeout.ms", "50000"),
        (r.GROUP_RESOURCE, "sg", "share.record.lock.duration.ms", None)]
    image = log.replay()
    assert image.group_configs == {"sg": {"share.auto.offset.reset": "earliest"},
                                   "cg": {"consumer.session.timeout.ms": "50000"}} == c.image.group_configs
    assert image.broker_configs == {} and image.security_version == 4
    c.set_group_configs("cg", {})  # the last override removed: the group is gone from the image
    assert log.replay().group_configs == {"sg": {"share.auto.offset.reset": "earliest"}}
    n = len(log.entries)
    c.set_group_configs("sg", {"share.auto.offset.reset": "earliest"})  # nothing changes: no record
    assert len(log.entries) == n
    image = log.replay()
    image.apply(r.config(r.GROUP_RESOURCE, "absent", "share.auto.offset.reset", None), 99)  # absent: no change
    assert image.group_configs == {"sg": {"share.auto.offset.reset": "earliest"}}


def test_default_group_resource_is_refused():
    c, log = controller()
    with pytest.raises(ControllerError) as err:
        c.set_group_configs("", {"share.auto.offset.reset": "earliest"})
    assert err.value.code == INVALID_REQUEST and log.entries == []


def test_group_configs_in_snapshots_and_copies():
    c, log = controller()
    c.set_group_configs("sg", {"share.auto.offset.reset": "earliest"})
    image = log.replay()
    restored = MetadataImage.from_json(json.loads(json.dumps(image.to_json())))
    assert restored.group_configs == {"sg": {"share.auto.offset.reset": "earliest"}}
    assert restored.to_json() == image.to_json()
    old = image.to_json()
    del old["groupConfigs"]  # a snapshot written before GROUP records
    assert MetadataImage.from_json(old).group_configs == {}
    copy = image.copy()
    copy.apply(r.config(r.GROUP_RESOURCE, "sg", "share.auto.offset.reset", "latest"), 100)
    assert image.group_configs["sg"]["share.auto.offset.reset"] == "earliest"  # copies are independent


def test_group_config_store_follows_the_image_without_a_file(tmp_path):
    """GroupConfigStore.follow: the overrides become the image's, the listeners are told of each group
    that changed (as after a local commit); a cluster node neither reads nor writes the file."""
    from minikafka.broker.config.core import BrokerConfig
    from minikafka.broker.config.group_configs import CONFIG_FILE, GroupConfigStore
    config = BrokerConfig({"log.dirs": str(tmp_path), "node.id": "2"})
    store = GroupConfigStore(config, tmp_path)
    told = []
    store.on_change(lambda g, props: told.append((g, props)))
    c, log = controller()
    c.set_group_configs("sg", {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"})
    c.set_group_configs("cg", {"consumer.session.timeout.ms": "50000"})
    store.follow(log.replay().group_configs)
    assert store.group_config("sg", "share.auto.offset.reset") == "earliest"
    assert store.group_config("sg", "share.record.lock.duration.ms") == 15000
    assert store.group_config("cg", "consumer.session.timeout.ms") == 50000
    assert sorted(told) == [("cg", {"consumer.session.timeout.ms": "50000"}),
                            ("sg", {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"})]
    told.clear()
    store.follow(log.replay().group_configs)  # the same: nobody told
    assert told == []
    c.set_group_configs("cg", {})
    store.follow(log.replay().group_configs)
    assert told == [("cg", {})] and store.group_config("cg", "consumer.session.timeout.ms") == 45000
    assert [d for d in store.describe("sg") if d[0] == "share.auto.offset.reset"][0][1:3] == ("earliest", 8)
    assert list(tmp_path.iterdir()) == []
    # a cluster node's store does not read the single-node file
    (tmp_path / CONFIG_FILE).write_text(json.dumps({"groups": {"x": {"share.auto.offset.reset": "earliest"}}}))
    single = GroupConfigStore(config, tmp_path)
    single.load()
    assert single.overrides == {"x": {"share.auto.offset.reset": "earliest"}}
    voters = "1@127.0.0.1:9093,2@127.0.0.1:9094"
    clustered = GroupConfigStore(BrokerConfig({"log.dirs": str(tmp_path), "node.id": "2",
                                               "process.roles": "broker,controller",
                                               "controller.quorum.voters": voters,
                                               "controller.listener.names": "CONTROLLER",
                                               "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9094",
                                               "listener.security.protocol.map":
                                                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}), tmp_path)
    assert getattr(clustered.config, "quorum", None) is not None
    clustered.load()
    assert clustered.overrides == {}


def test_security_sync_feeds_group_configs(tmp_path):
    from minikafka.broker.cluster.security_sync import SecuritySync

    class Stub:
        def __init__(self) -> None:
            self.seen = []

        def follow(self, *args) -> None:
            self.seen.append(args)

    class State:
        node_id = 1
        authorizer = None

        def __init__(self) -> None:
            self.scram_credentials = Stub()
            self.dynamic_config = Stub()
            self.group_configs = Stub()
            self.delegation_tokens = Stub()
            self.client_metrics_configs = Stub()
            self.client_quotas = Stub()

    state = State()
    c, log = controller()
    c.set_group_configs("sg", {"share.auto.offset.reset": "earliest"})
    sync = SecuritySync(state)
    sync(log.replay(), [], [])
    assert state.group_configs.seen == [({"sg": {"share.auto.offset.reset": "earliest"}},)]
    sync(log.replay(), [], [])  # nothing moved: not followed again
    assert len(state.group_configs.seen) == 1
