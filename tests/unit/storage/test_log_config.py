"""LogConfig: Kafka keys, defaults, validation, round trip."""
from __future__ import annotations

import pytest

from minikafka.storage import TOPIC_CONFIG_KEYS, InvalidConfigError, LogConfig


def test_defaults_match_kafka():
    props = LogConfig().to_props()
    assert set(props) == TOPIC_CONFIG_KEYS
    assert props["segment.bytes"] == "1073741824"
    assert props["retention.ms"] == "604800000"
    assert props["retention.bytes"] == "-1"
    assert props["max.message.bytes"] == "1048588"
    assert props["flush.messages"] == str(2**63 - 1)
    assert props["cleanup.policy"] == "delete"
    assert props["message.timestamp.type"] == "CreateTime"
    assert props["preallocate"] == "false"


def test_from_props_overrides_base():
    base = LogConfig(retention_ms=1000)
    cfg = LogConfig.from_props({"segment.bytes": "1024", "cleanup.policy": "delete, compact",
                                "message.timestamp.type": "LogAppendTime",
                                "unclean.leader.election.enable": "TRUE"}, base)
    assert cfg.segment_bytes == 1024 and cfg.retention_ms == 1000
    assert cfg.cleanup_policy == "delete,compact" and cfg.delete_enabled and cfg.compact_enabled
    assert cfg.log_append_time and cfg.unclean_leader_election_enable
    assert LogConfig.from_props(cfg.to_props()) == cfg


@pytest.mark.parametrize("key,value", [
    ("segment.bytes", "abc"), ("segment.bytes", "13"), ("retention.ms", "-2"),
    ("cleanup.policy", "zap"), ("cleanup.policy", ""), ("message.timestamp.type", "Now"),
    ("min.cleanable.dirty.ratio", "1.5"), ("preallocate", "yes"), ("flush.messages", "0"),
    ("segment.bytes", str(2**31)), ("no.such.key", "1"), ("retention.ms", None),
])
def test_invalid_values(key, value):
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_props({key: value})
    assert info.value.key == key
