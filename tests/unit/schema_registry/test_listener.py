"""`schema.registry.listener`: http://HOST:PORT, checked with the broker's config before anything opens."""
from __future__ import annotations

import pytest

from minikafka.broker.config.core import BrokerConfig, ConfigError
from minikafka.schema_registry.listener import ListenerError, parse_listener


def test_parse_listener() -> None:
    assert parse_listener("http://127.0.0.1:8081") == ("127.0.0.1", 8081, False)
    assert parse_listener(" http://localhost:0/ ") == ("localhost", 0, False)
    assert parse_listener("https://localhost:8443") == ("localhost", 8443, True)
    for bad in ("127.0.0.1:8081", "ftp://h:1", "http://h", "http://h:x", "http://h:1/path", "http://:1"):
        with pytest.raises(ListenerError):
            parse_listener(bad)


def test_off_by_default_and_a_bad_value_is_a_config_error(tmp_path) -> None:
    assert BrokerConfig({"log.dirs": str(tmp_path)}).get("schema.registry.listener") == ""
    assert BrokerConfig({"log.dirs": str(tmp_path), "schema.registry.listener": "http://127.0.0.1:8081"})
    with pytest.raises(ConfigError, match="schema.registry.listener"):
        BrokerConfig({"log.dirs": str(tmp_path), "schema.registry.listener": "ftp://h:1"})
