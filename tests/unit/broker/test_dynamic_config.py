"""broker/config/dynamic.py and broker/config/group_configs.py without a server: layers, synonyms,
refusals, persistence (the file and what a restart reads back), and the group_config lookup."""
from __future__ import annotations

import json

import pytest

from minikafka.broker.config.core import BrokerConfig
from minikafka.broker.config.dynamic import (
    CONFIG_FILE,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT,
    SOURCE_STATIC,
    ConfigRequestError,
    DynamicBrokerConfig,
    broker_synonyms,
)
from minikafka.broker.config.group_configs import GroupConfigStore

INVALID_REQUEST, INVALID_CONFIG = 42, 40


def make(tmp_path, **static) -> DynamicBrokerConfig:
    config = BrokerConfig({"log.dirs": str(tmp_path), **{k.replace("_", "."): v for k, v in static.items()}})
    d = DynamicBrokerConfig(config, tmp_path)
    d.load()
    return d


def test_synonyms_follow_kafka_order(tmp_path):
    d = make(tmp_path, log_retention_hours="100")
    assert broker_synonyms("log.retention.minutes") == ["log.retention.ms", "log.retention.minutes",
                                                       "log.retention.hours"]
    d.replace(False, {"log.retention.ms": "7000"})
    d.replace(True, {"log.retention.ms": "5000"})
    assert d.synonyms("log.retention.ms") == [
        ("log.retention.ms", "5000", SOURCE_DYNAMIC_BROKER), ("log.retention.ms", "7000", SOURCE_DYNAMIC_DEFAULT),
        ("log.retention.hours", "100", SOURCE_STATIC), ("log.retention.hours", "168", SOURCE_DEFAULT)]
    # entries before the described name itself are dropped (Kafka's dropWhile)
    assert d.synonyms("log.retention.hours") == [("log.retention.hours", "100", SOURCE_STATIC),
                                                 ("log.retention.hours", "168", SOURCE_DEFAULT)]
    assert d.synonyms("log.retention.ms", default_only=True) == [
        ("log.retention.ms", "7000", SOURCE_DYNAMIC_DEFAULT)]


def test_change_applies_to_the_config_and_notifies(tmp_path):
    d = make(tmp_path, log_retention_hours="1")
    seen = []
    d.on_change(lambda config: seen.append(config.log_config.retention_ms))
    d.replace(False, {"log.retention.ms": "7200000"})
    assert d.config.log_config.retention_ms == 7_200_000 and seen == [7_200_000]
    d.replace(True, {"message.max.bytes": "5000"})
    assert d.config.log_config.max_message_bytes == 5000
    d.replace(False, {})
    assert d.config.log_config.retention_ms == 3_600_000
    assert d.config.static_props["log.retention.hours"] == "1"
    assert d.config.get("message.max.bytes") == "5000"


@pytest.mark.parametrize("props, per_broker, message", [
    ({"node.id": "3", "log.dirs": "/x"}, True, "Cannot update these configs dynamically: [node.id, log.dirs]"),
    ({"log.retention.hours": "3"}, False, "Cannot update these configs dynamically: [log.retention.hours]"),
    ({"listeners": "PLAINTEXT://:1"}, True, "Cannot update these configs dynamically: [listeners]"),
    ({"minikafka.max.partitions": "5"}, True, "Cannot update these configs dynamically"),
    ({"ssl.keystore.location": "/k"}, True, "only per-listener using the listener prefix"),
    ({"ssl.cipher.suites": "X"}, False, "Cannot update these configs at default cluster level"),
    ({"log.retention.ms": "soon"}, False, "Invalid value soon for configuration log.retention.ms"),
    ({"log.segment.bytes": "1"}, False, "Value must be at least 1048576"),
    ({"max.connections": "-5"}, False, "Invalid value -5 for configuration max.connections: Value must be at least 0"),
])
def test_refusals(tmp_path, props, per_broker, message):
    d = make(tmp_path)
    with pytest.raises(ConfigRequestError) as info:
        d.replace(per_broker, props)
    assert info.value.code == INVALID_REQUEST and message in str(info.value)
    assert not (tmp_path / CONFIG_FILE).exists() and d.layer(per_broker) == {}


def test_resource_names(tmp_path):
    d = make(tmp_path)
    assert d.check_resource_name("") is False and d.check_resource_name("1") is True
    for bad in ("2", "x"):
        with pytest.raises(ConfigRequestError):
            d.check_resource_name(bad)


def test_incremental_list_ops_and_unknown_op(tmp_path):
    d = make(tmp_path)
    assert d.incremental(False, [("log.cleanup.policy", 2, "compact")]) == {"log.cleanup.policy": "delete,compact"}
    with pytest.raises(ConfigRequestError) as info:
        d.incremental(False, [("log.retention.ms", 2, "1")])
    assert info.value.code == INVALID_CONFIG
    with pytest.raises(ConfigRequestError):
        d.incremental(False, [("log.retention.ms", 9, "1")])


def test_persisted_and_reloaded_and_bad_entries_dropped(tmp_path):
    d = make(tmp_path)
    d.replace(False, {"log.retention.ms": "7000", "custom.key": "x"})
    d.replace(True, {"log.segment.bytes": "2000000"})
    again = make(tmp_path)
    assert again.cluster_default == {"log.retention.ms": "7000", "custom.key": "x"}
    assert again.per_broker == {"log.segment.bytes": "2000000"}
    assert again.config.log_config.segment_bytes == 2_000_000
    # an entry that is no longer acceptable (edited file, key made static) is ignored, the rest kept
    data = json.loads((tmp_path / CONFIG_FILE).read_text())
    data["default"]["node.id"] = "9"
    (tmp_path / CONFIG_FILE).write_text(json.dumps(data))
    assert "node.id" not in make(tmp_path).cluster_default


def test_group_config_lookup_validation_and_persistence(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path)})
    store = GroupConfigStore(config, tmp_path)
    assert store.group_config("g", "consumer.session.timeout.ms") == 45000
    store.replace("g", {"consumer.session.timeout.ms": "50000"})
    assert store.group_config("g", "consumer.session.timeout.ms") == 50000
    assert store.group_config("other", "consumer.session.timeout.ms") == 45000
    assert store.group_config("g", "share.renew.acknowledge.enable") is True
    assert store.group_config("g", "share.auto.offset.reset") == "latest"
    for props, message in [({"consumer.session.timeout.ms": "44999"}, "must be greater than or equal to"),
                           ({"share.auto.offset.reset": "bogus"}, "Invalid value bogus"),
                           ({"consumer.heartbeat.interval.ms": "15001"}, "must be less than or equal to"),
                           ({"nope": "1"}, "Unknown group config name: nope")]:
        with pytest.raises(ConfigRequestError) as info:
            store.replace("g", props)
        assert info.value.code == INVALID_CONFIG and message in str(info.value)
    reloaded = GroupConfigStore(config, tmp_path)
    reloaded.load()
    assert reloaded.group_config("g", "consumer.session.timeout.ms") == 50000
    reloaded.replace("g", {})
    assert reloaded.overrides == {}
