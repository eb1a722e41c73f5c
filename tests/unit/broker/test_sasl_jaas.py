"""Kafka's JAAS config syntax (broker/security/sasl/jaas.py) and the per-listener SASL settings."""
from __future__ import annotations

import pytest

from minikafka.broker.config.core import BrokerConfig, ConfigError
from minikafka.broker.security.sasl.jaas import JaasConfigError, parse_jaas_config, plain_users

PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
         'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def test_kafka_example():
    [entry] = parse_jaas_config(PLAIN)
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.control_flag == "REQUIRED"
    assert plain_users([entry]) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_quotes_escapes_comments_words_and_several_entries():
    text = ("// comment\norg.apache.kafka.common.security.plain.PlainLoginModule Required /* c */\n"
            "  user_bob=bob-secret user_q='single' user_esc=\"a\\\"b\\\\c\" user_semi=\"x;y\";\n"
            "org.apache.kafka.common.security.scram.ScramLoginModule optional;")
    plain, scram_entry = parse_jaas_config(text)
    assert plain.options == {"user_bob": "bob-secret", "user_q": "single", "user_esc": 'a"b\\c', "user_semi": "x;y"}
    assert scram_entry.control_flag == "OPTIONAL" and scram_entry.options == {}
    assert plain_users([scram_entry]) == {}


@pytest.mark.parametrize("text", [
    "", "   // only a comment",
    "org.Module",  # no control flag
    "org.Module bogus;",
    "org.Module required user_a=\"x\"",  # no ';'
    "org.Module required user_a=;",
    "org.Module required user_a 'x';",
    "org.Module required user_a=12345;",  # unquoted number: Kafka's StreamTokenizer has no string value
])
def test_refused_as_kafka_refuses(text):
    with pytest.raises(JaasConfigError):
        parse_jaas_config(text)


BASE = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/unused"}
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SCRAM = {f"listener.name.sasl_plaintext.{m}.sasl.jaas.config": SCRAM_JAAS for m in ("scram-sha-256", "scram-sha-512")}


def test_listener_settings_and_overrides():
    cfg = BrokerConfig({**BASE, **SCRAM, "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
                        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN,
                        "connections.max.reauth.ms": "5000",
                        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "7000"})
    s = cfg.sasl["SASL_PLAINTEXT"]
    assert list(cfg.sasl) == ["SASL_PLAINTEXT"]
    assert s.mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert s.plain_users["alice"] == "alice-secret"
    assert s.reauth_ms == {"SCRAM-SHA-512": 5000, "PLAIN": 7000}
    assert s.failed_auth_delay_ms == 100 and s.max_receive_size == 524288
    cfg = BrokerConfig({**BASE, **SCRAM, "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    assert cfg.sasl["SASL_PLAINTEXT"].mechanisms == ("SCRAM-SHA-256",)


@pytest.mark.parametrize("extra", [
    {},  # Kafka's default mechanism GSSAPI is not served
    {"sasl.enabled.mechanisms": "OAUTHBEARER"},
    {"sasl.enabled.mechanisms": "PLAIN"},  # PLAIN without a JAAS config
    {"sasl.enabled.mechanisms": "SCRAM-SHA-256"},  # SCRAM too needs one (Kafka: no 'KafkaServer' JAAS entry)
    {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN},  # unprefixed: ignored, as Kafka
    {"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required"},
])
def test_unusable_sasl_config_refuses_start(extra):
    with pytest.raises(ConfigError):
        BrokerConfig({**BASE, **extra})
