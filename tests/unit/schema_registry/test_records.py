"""The `_schemas` keys byte for byte as Confluent writes them: compaction matches keys by their bytes, so a key
spelled differently would never replace (or tombstone) one Confluent wrote on a topic taken over from it."""
from __future__ import annotations

import json

from minikafka.schema_registry import records as r
from minikafka.schema_registry.state import RegistryState


def test_global_config_and_mode_keys_omit_the_subject() -> None:
    assert r.config_key(None) == b'{"keytype":"CONFIG","magic":0}'
    assert r.mode_key(None) == b'{"keytype":"MODE","magic":0}'
    assert json.loads(r.config_key("orders-value")) == {"keytype": "CONFIG", "subject": "orders-value", "magic": 0}


def test_a_confluent_global_config_record_sets_the_global_level_and_its_tombstone_clears_it() -> None:
    state = RegistryState()
    state.apply(r.decode(b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":"FULL"}'))
    assert state.compatibility(None) == "FULL"
    state.apply(r.decode(r.config_key(None), None))
    assert state.compatibility(None) == "BACKWARD"
