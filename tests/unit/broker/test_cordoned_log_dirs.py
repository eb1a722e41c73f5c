"""broker/config/core.py: cordoned.log.dirs (KIP-1066) parsed with Kafka's checks; a node of a multi-node
cluster refuses it (its controller does not know cordoned dirs)."""
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


def test_a_cluster_node_refuses_it(tmp_path):
    cluster = {"log.dirs": str(tmp_path), "node.id": "1", "process.roles": "broker,controller",
               "controller.listener.names": "CONTROLLER",
               "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
               "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
               "controller.quorum.voters": "1@127.0.0.1:19001,2@127.0.0.1:19002,3@127.0.0.1:19003"}
    BrokerConfig(cluster)
    with pytest.raises(ConfigError, match="not supported on a node of a multi-node cluster"):
        BrokerConfig({**cluster, "cordoned.log.dirs": "*"})
