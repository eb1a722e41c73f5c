"""broker/config/core.py: properties parsing, precedence (file < env < override), Kafka time-key precedence,
warnings for unknown keys and ConfigError for unusable values."""
from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka.broker.config.core import DEFAULTS, BrokerConfig, ConfigError, Listener, parse_listeners, parse_properties

ROOT = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------------------- parse_properties

def test_parse_properties_comments_blank_lines_and_separators():
    text = """
# a comment
! another comment
   # indented comment
node.id=3
listeners = PLAINTEXT://127.0.0.1:9093
log.dirs:   /tmp/data
empty.value=
bare.key
with.equals=a=b:c
colon.first:x=y
"""
    assert parse_properties(text) == {
        "node.id": "3",
        "listeners": "PLAINTEXT://127.0.0.1:9093",
        "log.dirs": "/tmp/data",
        "empty.value": "",
        "bare.key": "",
        "with.equals": "a=b:c",
        "colon.first": "x=y",
    }


def test_parse_properties_continuation_lines():
    text = "log.dirs=/a,\\\n    /b,\\\n\t/c\nnext=1\n"
    assert parse_properties(text) == {"log.dirs": "/a,/b,/c", "next": "1"}


def test_parse_properties_continuation_line_starting_with_hash_is_content():
    # Java: a continuation line is never a comment.
    assert parse_properties("k=v\\\n#not-a-comment\n") == {"k": "v#not-a-comment"}


def test_parse_properties_last_duplicate_wins_and_crlf():
    assert parse_properties("a=1\r\na=2\r\n") == {"a": "2"}


def test_parse_properties_of_shipped_server_properties():
    props = parse_properties((ROOT / "config" / "server.properties").read_text())
    assert props["node.id"] == "1"
    assert props["log.retention.hours"] == "168"
    assert all(not k.startswith("#") for k in props)
    BrokerConfig(props)  # the shipped file is a valid configuration


# ------------------------------------------------------------------------------------ precedence

def test_load_precedence_defaults_file_env_override(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nlog.dirs=/from/file\nnode.id=5\nmessage.max.bytes=1000\n")
    env = {"MINIKAFKA_NUM_PARTITIONS": "3", "MINIKAFKA_LOG_DIRS": "/from/env", "UNRELATED": "x",
           "MINIKAFKA_CONFIG": "/ignored.properties", "MINIKAFKA_LOG_LEVEL": "debug"}
    cfg = BrokerConfig.load(path, overrides={"num.partitions": "4"}, environ=env)
    assert cfg.num_partitions == 4                         # override beats env and file
    assert cfg.log_dirs == [Path("/from/env")]             # env beats file
    assert cfg.node_id == 5                                # file beats default
    assert cfg.log_config.max_message_bytes == 1000
    assert cfg.socket_request_max_bytes == int(DEFAULTS["socket.request.max.bytes"])  # default
    assert "config" not in cfg.props and "log.level" not in cfg.props
    assert "unrelated" not in cfg.props


def test_env_names_map_to_dotted_keys():
    cfg = BrokerConfig.load(None, environ={"MINIKAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
                                           "MINIKAFKA_SOCKET_REQUEST_MAX_BYTES": "1234"})
    assert cfg.auto_create_topics is False
    assert cfg.socket_request_max_bytes == 1234


def test_load_without_file_or_env_is_defaults():
    cfg = BrokerConfig.load(None, environ={})
    assert cfg.props == DEFAULTS
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.log_config.retention_ms == 168 * 3_600_000


# --------------------------------------------------------------------------- time-key precedence

@pytest.mark.parametrize("props,expected", [
    ({}, 168 * 3_600_000),
    ({"log.retention.hours": "2"}, 2 * 3_600_000),
    ({"log.retention.minutes": "10", "log.retention.hours": "2"}, 600_000),
    ({"log.retention.ms": "1234", "log.retention.minutes": "10", "log.retention.hours": "2"}, 1234),
    ({"log.retention.ms": "1234", "log.retention.hours": "2"}, 1234),
    ({"log.retention.ms": "-1"}, -1),
    ({"log.retention.ms": "-5"}, -1),
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.minutes": "-1", "log.retention.hours": "5"}, -1),
])
def test_retention_ms_minutes_hours_precedence(props, expected):
    assert BrokerConfig(props).log_config.retention_ms == expected


@pytest.mark.parametrize("props,expected", [
    ({}, 168 * 3_600_000),
    ({"log.roll.hours": "1"}, 3_600_000),
    ({"log.roll.ms": "500", "log.roll.hours": "1"}, 500),
])
def test_roll_ms_hours_precedence(props, expected):
    assert BrokerConfig(props).log_config.segment_ms == expected


def test_broker_log_keys_feed_the_default_topic_config():
    cfg = BrokerConfig({"log.segment.bytes": "20000", "log.retention.bytes": "555", "message.max.bytes": "777",
                        "log.index.interval.bytes": "99", "log.cleanup.policy": "compact",
                        "log.message.timestamp.type": "LogAppendTime", "log.flush.interval.ms": "250"})
    lc = cfg.log_config
    assert (lc.segment_bytes, lc.retention_bytes, lc.max_message_bytes, lc.index_interval_bytes) == (20000, 555, 777, 99)
    assert lc.cleanup_policy == "compact" and lc.log_append_time and lc.flush_ms == 250


# ------------------------------------------------------------------------------ warnings, errors

def test_unknown_key_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="minikafka.broker.config.core"):
        cfg = BrokerConfig({"no.such.key": "1", "log.retention.hourz": "3"})
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("no.such.key" in m for m in messages)
    assert any("log.retention.hourz" in m for m in messages)
    assert cfg.log_config.retention_ms == 168 * 3_600_000  # the typo did not take effect


def test_known_ignored_kafka_keys_do_not_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="minikafka.broker.config.core"):
        BrokerConfig({"process.roles": "broker,controller", "controller.quorum.voters": "1@localhost:9093",
                      "num.network.threads": "3", "broker.id": "1"})
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("listeners", [
    "localhost:9092",                 # no scheme
    "PLAINTEXT://localhost",          # no port
    "PLAINTEXT://localhost:notaport",
    "PLAINTEXT://localhost:99999",
    "",
    " , ",
])
def test_bad_listener_raises_config_error(listeners):
    with pytest.raises(ConfigError):
        BrokerConfig({"listeners": listeners})


def test_parse_listeners_multiple():
    assert parse_listeners("PLAINTEXT://a:1, internal://:2,EXTERNAL://[::1]:3") == [
        Listener("PLAINTEXT", "a", 1), Listener("INTERNAL", "", 2), Listener("EXTERNAL", "::1", 3)]


@pytest.mark.parametrize("spec,expected", [
    ("PLAINTEXT://127.0.0.1:9092,PLAINTEXT_HOST://localhost:29092",
     [Listener("PLAINTEXT", "127.0.0.1", 9092), Listener("PLAINTEXT_HOST", "localhost", 29092)]),
    ("SASL_PLAINTEXT://:9094", [Listener("SASL_PLAINTEXT", "", 9094)]),
])
def test_parse_listeners_names_with_underscores(spec, expected):
    """Kafka listener names may contain '_' (SASL_PLAINTEXT, the common Docker PLAINTEXT_HOST); a URL
    parser rejects '_' in a scheme, so these must still parse."""
    assert parse_listeners(spec) == expected


def test_advertised_listener_must_match_a_listener_name_and_be_routable():
    with pytest.raises(ConfigError):
        BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "OTHER://h:9092"})
    with pytest.raises(ConfigError):
        BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    cfg = BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners": "PLAINTEXT://broker:19092"})
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "broker", 19092)]


@pytest.mark.parametrize("key,value", [
    ("node.id", "one"),
    ("num.partitions", "x"),
    ("socket.request.max.bytes", "1.5"),
    ("auto.create.topics.enable", "yes"),
    ("delete.topic.enable", ""),
    ("log.retention.ms", "soon"),
    ("log.retention.check.interval.ms", "often"),
    ("log.dirs", ""),
])
def test_bad_broker_values_raise_config_error(key, value):
    with pytest.raises(ConfigError):
        BrokerConfig({key: value})


@pytest.mark.parametrize("key,value", [
    ("log.segment.bytes", "abc"),
    ("log.cleanup.policy", "sometimes"),
    ("log.message.timestamp.type", "WallClock"),
])
def test_bad_topic_default_values_raise_config_error(key, value):
    """Invalid log.* defaults are configuration errors like any other (the CLI reports ConfigError as
    'configuration error', exit 2); they must not escape as a storage-level exception."""
    with pytest.raises(ConfigError):
        BrokerConfig({key: value})


def test_cli_reports_bad_config_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "minikafka.broker.cli.main", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'data'}", "--override", "log.segment.bytes=abc"],
        capture_output=True, text=True, timeout=20, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "configuration error" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_security_protocol_map_defaults_to_protocol_names():
    c = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert c.security_protocols == {"PLAINTEXT": "PLAINTEXT"}
    c = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT, external:plaintext"})
    assert c.security_protocols == {"PLAINTEXT": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}


@pytest.mark.parametrize("props, message", [
    ({"listeners": "EXTERNAL://127.0.0.1:0"}, "no security protocol"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "unknown security protocol"),
    ({"listener.security.protocol.map": "PLAINTEXT"}, "NAME:PROTOCOL"),
])
def test_security_protocol_map_errors(props, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(props)


@pytest.mark.parametrize("props, message", [
    ({"group.consumer.heartbeat.interval.ms": "4000"}, "must be within"),
    ({"group.consumer.session.timeout.ms": "45000", "group.consumer.heartbeat.interval.ms": "15000",
      "group.consumer.max.session.timeout.ms": "60000", "group.consumer.min.session.timeout.ms": "10000",
      "group.consumer.min.heartbeat.interval.ms": "1000"}, None),
    ({"group.consumer.assignors": "no.such.Assignor"}, "unknown consumer group assignor"),
])
def test_consumer_group_settings_checked_at_start_when_set(props, message):
    """The defaults are valid (nothing imported for them); a changed group.consumer.* value is checked."""
    if message is None:
        BrokerConfig(props)
    else:
        with pytest.raises(ConfigError, match=message):
            BrokerConfig(props)


def test_consumer_group_defaults_are_valid():
    from minikafka.coordinator.group.consumer.config import ConsumerGroupSettings
    ConsumerGroupSettings.from_props(BrokerConfig({}).get)
