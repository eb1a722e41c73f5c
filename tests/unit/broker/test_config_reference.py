"""broker/config/reference.py documents every key minikafka has (broker keys with a default, topic keys,
group keys) exactly once, and the generated reference pages of the docs site are up to date with it."""
from __future__ import annotations

from collections import Counter

from minikafka.broker.config import reference
from minikafka.broker.config.core import DEFAULTS, IGNORED_KAFKA_KEYS
from minikafka.broker.config.group_configs import GROUP_KEYS
from minikafka.broker.config.kafka_keys import KAFKA_BROKER_KEYS
from minikafka.storage.log_config import TOPIC_CONFIG_KEYS
from scripts import gen_config_docs


def test_every_broker_key_with_a_default_is_documented_once():
    rows = Counter(k for _title, section in reference.BROKER_SECTIONS for keys, _m in section for k in keys)
    assert [k for k, n in rows.items() if n > 1] == []
    assert set(rows) == set(DEFAULTS)


def test_the_other_documented_keys_are_kafka_keys_minikafka_accepts():
    others = {k for keys, _m in reference.OTHER_BROKER_KEYS for k in keys if "<" not in k}
    assert not others & set(DEFAULTS)
    assert others <= IGNORED_KAFKA_KEYS | set(KAFKA_BROKER_KEYS)


def test_topic_and_group_keys_are_documented():
    assert set(reference.TOPIC_KEYS) == set(TOPIC_CONFIG_KEYS)
    assert list(reference.GROUP_KEYS) == [k.name for k in GROUP_KEYS]


def test_documentation_lookup():
    assert reference.documentation("broker", "log.retention.ms") == reference.BROKER_KEYS["log.retention.ms"]
    assert reference.documentation("broker", "listener.name.internal.ssl.client.auth") == \
        reference.BROKER_KEYS["ssl.client.auth"]
    assert reference.documentation("topic", "retention.ms")
    assert reference.documentation("broker", "no.such.key") is None


def test_the_generated_pages_are_fresh():
    assert gen_config_docs.main(["--check"]) == 0, "run: .venv/bin/python scripts/gen_config_docs.py"
