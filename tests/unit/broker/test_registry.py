"""broker/network/registry.py: the static API table (what ApiVersions advertises, which module handles what)
must match what the handler modules register with @handles, and start-up must not import them."""
from __future__ import annotations

import subprocess
import sys

import pytest
from kafka.protocol.metadata import ApiVersionsResponse

from minikafka.broker.network.connection import api_versions_list, unsupported_api_versions_frame
from minikafka.broker.handlers import load_all
from minikafka.broker.log_opening import PARTITION_FIELDS
from minikafka.broker.network.registry import API_TABLE, EAGER_MODULES, HANDLERS, advertised_versions, module_name, spec_for

load_all()


def test_static_table_matches_the_decorators():
    assert sorted(HANDLERS) == sorted(API_TABLE)
    for key, entry in API_TABLE.items():
        spec = HANDLERS[key]
        assert (spec.min_version, spec.max_version) == (entry.min_version, entry.max_version), key
        fn = getattr(spec.handler, "__wrapped__", spec.handler)
        assert fn.__module__ == module_name(entry), (key, fn.__module__)
        assert spec.request_class.API_KEY == key


def test_api_versions_advertises_exactly_the_registered_handlers():
    from_decorators = [(s.api_key, s.min_version, s.max_version) for s in sorted(HANDLERS.values(),
                                                                                  key=lambda s: s.api_key)]
    assert advertised_versions() == from_decorators
    assert [(v.api_key, v.min_version, v.max_version) for v in api_versions_list()] == from_decorators
    frame = unsupported_api_versions_frame(7)
    resp = ApiVersionsResponse.decode(frame[8:], version=0)
    assert [(v.api_key, v.min_version, v.max_version) for v in resp.api_keys] == from_decorators


def test_spec_for_unknown_api_is_none():
    assert spec_for(9999) is None
    assert spec_for(0) is HANDLERS[0]


def test_partition_fields_exist_in_the_request_schemas():
    for key, fields in PARTITION_FIELDS.items():
        struct = HANDLERS[key].request_class._struct
        topics = struct.fields[fields.topics]
        assert fields.name in topics.fields, (key, fields.name)
        parts = topics.fields[fields.partitions]
        if fields.index is not None:
            assert fields.index in parts.fields, (key, fields.index)


def test_internal_topic_names_match_the_coordinators():
    from minikafka.broker import state
    from minikafka.coordinator.group.errors import OFFSETS_TOPIC
    from minikafka.coordinator.txn.state_manager import TXN_TOPIC
    assert (state.OFFSETS_TOPIC, state.TXN_TOPIC) == (OFFSETS_TOPIC, TXN_TOPIC)


def test_partition_dir_names_parse():
    from minikafka.storage.partition_metadata import parse_partition_dir
    assert [parse_partition_dir(n) for n in ["t-0", "a-b-12", "orders.v1-x-3", "__consumer_offsets-49"]] == [
        ("t", 0), ("a-b", 12), ("orders.v1-x", 3), ("__consumer_offsets", 49)]
    for bad in ["t", "t-", "-1", "t-x", "t-1-delete"]:
        with pytest.raises(ValueError):
            parse_partition_dir(bad)


LAZY = [
    "minikafka.coordinator.group.coordinator", "minikafka.coordinator.txn.coordinator",
    "minikafka.storage.partition_log", "minikafka.protocol.record_validator",
    "minikafka.broker.handlers.produce", "minikafka.broker.handlers.fetch", "kafka.protocol.admin",
    "kafka.protocol.producer", "importlib.metadata", "minikafka.raft.core",
]


def test_starting_the_server_imports_only_what_listening_needs():
    code = ("import sys, minikafka.broker.server, minikafka.broker.cli.main\n"
            f"print(sorted(m for m in {LAZY!r} if m in sys.modules))\n"
            "from minikafka.broker.network.registry import HANDLERS, spec_for\n"
            "print(sorted(HANDLERS))\n"
            "spec_for(0)\n"
            "print('minikafka.broker.handlers.produce' in sys.modules, 0 in HANDLERS)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]", out[0]
    eager = sorted(k for k, e in API_TABLE.items() if e.module in EAGER_MODULES)
    assert out[1] == str(eager)
    assert out[2] == "True True"


def test_status_page_protocol_table_matches_the_api_table() -> None:
    """The docs' table of APIs and versions (docs/status.md) is the dispatch table, row for row."""
    import re
    from pathlib import Path

    from kafka.protocol.api_key import ApiKey

    readme = (Path(__file__).resolve().parents[3] / "docs" / "status.md").read_text()
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)(?:–(\d+))? \|$", readme, re.M)
    table = {int(key): (name, int(lo), int(hi or lo)) for name, key, lo, hi in rows}
    assert table == {key: (ApiKey(key).name, e.min_version, e.max_version) for key, e in API_TABLE.items()}


def test_controller_table_matches_the_decorators_and_the_docs():
    """The controller listener's table (KRaft combined mode): each API has a handler with the same
    versions (its own controller handler, or the broker one); the controller table of docs/cluster.md lists it."""
    import re
    from pathlib import Path

    from kafka.protocol.api_key import ApiKey

    from minikafka.broker.network.registry import CONTROLLER_API_TABLE, CONTROLLER_HANDLERS

    for key, entry in CONTROLLER_API_TABLE.items():
        spec = spec_for(key, controller=True)
        assert spec is not None and spec is (CONTROLLER_HANDLERS.get(key) or HANDLERS[key]), key
        assert (spec.min_version, spec.max_version) == (entry.min_version, entry.max_version), key
    assert set(CONTROLLER_HANDLERS) <= set(CONTROLLER_API_TABLE)
    assert spec_for(0, controller=True) is None  # Produce: not on a controller listener
    from minikafka.broker.network.registry import QUORUM_BROKER_API_TABLE
    for key, entry in QUORUM_BROKER_API_TABLE.items():  # on broker listeners of a quorum node only
        # a single node serves it with a broker handler of its own (DescribeQuorum), or not at all
        assert spec_for(key) is (HANDLERS[key] if key in API_TABLE else None)
        assert spec_for(key, quorum=True) is CONTROLLER_HANDLERS[key] and key in CONTROLLER_API_TABLE
        assert (key, entry.min_version, entry.max_version) in advertised_versions(quorum=True)
    assert not {52, 53, 54} & set(API_TABLE)  # the quorum's RPCs: never on a broker listener
    assert advertised_versions(controller=True) == [(k, e.min_version, e.max_version)
                                                    for k, e in sorted(CONTROLLER_API_TABLE.items())]
    readme = (Path(__file__).resolve().parents[3] / "docs" / "cluster.md").read_text()
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)(?:–(\d+))? \|[^|]*\|$", readme, re.M)
    table = {int(key): (name, int(lo), int(hi or lo)) for name, key, lo, hi in rows}
    assert table == {key: (ApiKey(key).name, e.min_version, e.max_version)
                     for key, e in CONTROLLER_API_TABLE.items()}
