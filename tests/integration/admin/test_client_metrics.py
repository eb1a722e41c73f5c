"""Client metrics subscriptions (KIP-714) as config resources: CLIENT_METRICS (type 16) through
IncrementalAlterConfigs / DescribeConfigs, ListConfigResources (74; v0 was ListClientMetricsResources),
Kafka's validation codes, and Kafka's own tools (kafka-client-metrics, kafka-configs --entity-type
client-metrics). Black-box: runs against both brokers (--broker=kafka too); every subscription is
deleted again.
"""
from __future__ import annotations

import sys
import time
import uuid

import pytest
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.admin.configs import ListConfigResourcesRequest, ListConfigResourcesResponse

from tests.conftest import ROOT
from tests.support.helpers import RawClient, wait_broker_connections_closed

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

CLIENT_METRICS, TOPIC, BROKER, GROUP = 16, 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
R = IncrementalAlterConfigsRequest.AlterConfigsResource
C = R.AlterableConfig
D = DescribeConfigsRequest.DescribeConfigsResource


@pytest.fixture(scope="module")
def client(shared_broker):
    with RawClient(shared_broker.bootstrap, client_id="client-metrics-test") as c:
        yield c
    wait_broker_connections_closed(shared_broker)


def alter(client, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False) -> tuple[int, str]:
    resp = client.request(IncrementalAlterConfigsRequest(
        resources=[R(resource_type=CLIENT_METRICS, resource_name=name,
                     configs=[C(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=validate_only), 1)
    (r,) = resp.responses
    return r.error_code, r.error_message


def describe(client, name: str, keys: list[str] | None = None, synonyms: bool = True, docs: bool = False):
    """(error code, [(name, value, source, config type, synonyms as (name, value, source)[, documentation])])"""
    resp = client.request(DescribeConfigsRequest(resources=[D(resource_type=CLIENT_METRICS, resource_name=name,
                                                                configuration_keys=keys)],
                                                 include_synonyms=synonyms, include_documentation=docs), 4)
    (r,) = resp.results
    assert all(not c.read_only and not c.is_sensitive for c in r.configs)
    return r.error_code, sorted((c.name, c.value, c.config_source, c.config_type,
                                 [(s.name, s.value, s.source) for s in c.synonyms]) + ((c.documentation,) if docs else ())
                                for c in r.configs)


# an unknown subscription, or one without any key set: Kafka's defaults (DEFAULT_CONFIG, INT / LIST types)
DEFAULTS = [("interval.ms", "300000", 5, 3, []), ("match", "", 5, 7, []), ("metrics", "", 5, 7, [])]


def listed(client, version: int, types: list[int] | None = None) -> tuple[int, list[tuple[str, int]]]:
    req = ListConfigResourcesRequest(resource_types=types or []) if version >= 1 else ListConfigResourcesRequest()
    resp = client.request(req, version, ListConfigResourcesResponse)
    return resp.error_code, sorted((r.resource_name, r.resource_type if version >= 1 else CLIENT_METRICS)
                                   for r in resp.config_resources)


def eventually(fn, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_subscription_set_described_listed_and_deleted(client):
    name = f"sub-{uuid.uuid4().hex[:8]}"
    assert alter(client, name, ("metrics", SET, "org.apache.kafka.producer.,org.apache.kafka.consumer."),
                 ("interval.ms", SET, "1000"), ("match", SET, "client_id=app-.*"))[0] == 0
    try:
        def shown():
            code, entries = describe(client, name)
            assert code == 0
            # the keys set: CLIENT_METRICS_CONFIG (7), themselves their one synonym
            metrics = "org.apache.kafka.producer.,org.apache.kafka.consumer."
            assert entries == [("interval.ms", "1000", 7, 3, [("interval.ms", "1000", 7)]),
                               ("match", "client_id=app-.*", 7, 7, [("match", "client_id=app-.*", 7)]),
                               ("metrics", metrics, 7, 7, [("metrics", metrics, 7)])], entries
            assert (name, CLIENT_METRICS) in listed(client, 0)[1]
            assert (name, CLIENT_METRICS) in listed(client, 1, [CLIENT_METRICS])[1]
        eventually(shown)
        assert describe(client, name, ["interval.ms"])[1] == [("interval.ms", "1000", 7, 3, [("interval.ms", "1000", 7)])]
        assert describe(client, name, ["interval.ms"], synonyms=False, docs=True)[1] == [
            ("interval.ms", "1000", 7, 3, [], "Metrics push interval in milliseconds")]
        # one key deleted: its default again
        assert alter(client, name, ("match", DELETE, None))[0] == 0
        eventually(lambda: _assert_value(client, name, "match", ""))
        assert ("match", "", 5, 7, []) in describe(client, name)[1]
        # Kafka 4.3's controller has no types for these keys: APPEND / SUBTRACT are refused, even for lists
        code, message = alter(client, name, ("metrics", APPEND, "org.apache.kafka.admin."))
        assert (code, message) == (40, "Can't APPEND to key metrics because its type is not LIST.")
        assert alter(client, name, ("match", SUBTRACT, "x"))[0] == 40
        # validate_only changes nothing
        assert alter(client, name, ("interval.ms", SET, "2000"), validate_only=True)[0] == 0
        eventually(lambda: _assert_value(client, name, "interval.ms", "1000"))
    finally:
        assert alter(client, name, ("metrics", DELETE, None), ("interval.ms", DELETE, None),
                     ("match", DELETE, None))[0] == 0

    def gone():
        assert describe(client, name) == (0, DEFAULTS)  # an unknown subscription is no error: the defaults
        assert (name, CLIENT_METRICS) not in listed(client, 0)[1]
    eventually(gone)


def _assert_value(client, name: str, key: str, value: str) -> None:
    entries = dict((e[0], e[1]) for e in describe(client, name)[1])
    assert entries.get(key) == value, entries


@pytest.mark.parametrize("ops,code,message", [
    ([("nope", SET, "1")], 42, "Unknown client metrics configuration: nope"),  # INVALID_REQUEST
    ([("interval.ms", SET, "50")], 42, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 "
                                       "(1 hour)"),
    ([("interval.ms", SET, "3600001")], 42, None),  # above one hour
    ([("interval.ms", SET, "soon")], 40, "Invalid value soon for configuration interval.ms: Not a number of type INT"),
    ([("match", SET, "client_id")], 40, "Illegal client matching pattern: client_id"),  # not name=regex
    ([("match", SET, "colour=red")], 40, "Illegal client matching pattern: colour=red"),  # not a client attribute
    ([("match", SET, "client_id=[")], 40, "Illegal client matching pattern: client_id=["),  # not a regex
    ([("interval.ms", APPEND, "100")], 40, "Can't APPEND to key interval.ms because its type is not LIST."),
])
def test_bad_subscription_answers_kafkas_code(client, ops, code, message):
    name = f"bad-{uuid.uuid4().hex[:8]}"
    got = alter(client, name, *ops)
    assert got[0] == code and (message is None or got[1] == message), got
    assert describe(client, name) == (0, DEFAULTS)
    assert (name, CLIENT_METRICS) not in listed(client, 0)[1]


def test_empty_subscription_name_is_invalid_request(client):
    assert alter(client, "", ("interval.ms", SET, "1000")) == (42, "Subscription name can't be empty")
    assert describe(client, "")[0] == 42


def test_legacy_alter_configs_replaces_a_subscription(client):
    from kafka.protocol.admin import AlterConfigsRequest
    A = AlterConfigsRequest.AlterConfigsResource
    name = f"legacy-{uuid.uuid4().hex[:8]}"

    def replace(**configs: str) -> int:
        resp = client.request(AlterConfigsRequest(resources=[A(resource_type=CLIENT_METRICS, resource_name=name, configs=[
            A.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()])], validate_only=False), 2)
        return resp.responses[0].error_code
    assert replace(interval_ms="2000", metrics="a.") == 0
    eventually(lambda: _assert_value(client, name, "metrics", "a."))
    assert replace(interval_ms="3000") == 0  # the whole set: metrics goes back to its default
    eventually(lambda: _assert_value(client, name, "metrics", ""))
    assert _assert_value(client, name, "interval.ms", "3000") is None
    assert replace() == 0
    eventually(lambda: _assert_not_listed(client, name))


def _assert_not_listed(client, name: str) -> None:
    assert (name, CLIENT_METRICS) not in listed(client, 0)[1]


def test_list_config_resources_v1_types(client, shared_broker):
    code, everything = listed(client, 1)
    assert code == 0
    types = {t for _, t in everything}
    assert BROKER in types and 8 in types  # every broker, as BROKER and BROKER_LOGGER resources
    code, brokers = listed(client, 1, [BROKER])
    assert code == 0 and brokers and all(t == BROKER and n.isdigit() for n, t in brokers)
    assert listed(client, 1, [CLIENT_METRICS, BROKER])[0] == 0
    # a type ListConfigResources does not list (BROKER is 4, 1 is UNKNOWN): UNSUPPORTED_VERSION for the request
    assert listed(client, 1, [1])[0] == 35


def tool(name: str, *args: str, ok: bool = True) -> str:
    res = lab.run_tool(name, [str(a) for a in args], timeout=90)
    out = f"$ {name} {' '.join(args)}\n--- exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    if ok:
        assert res.returncode == 0, out
    return res.stdout + res.stderr


def test_kafka_client_metrics_tool(shared_broker):
    lab.fetch()
    bs = shared_broker.bootstrap
    name = f"tool-{uuid.uuid4().hex[:8]}"
    out = tool("ClientMetricsCommand", "--bootstrap-server", bs, "--alter", "--name", name,
               "--metrics", "org.apache.kafka.producer.", "--interval", "2000", "--match", "client_id=x.*")
    assert f"Altered client metrics config for {name}." in out, out
    try:
        def described():
            out = tool("ClientMetricsCommand", "--bootstrap-server", bs, "--describe", "--name", name)
            assert f"Client metrics configs for {name} are:" in out, out
            assert "interval.ms=2000" in out and "metrics=org.apache.kafka.producer." in out, out
            assert "match=client_id=x.*" in out, out
        eventually(described)
        eventually(lambda: _assert_in(name, tool("ClientMetricsCommand", "--bootstrap-server", bs, "--list")))
        out = tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "client-metrics",
                   "--entity-name", name)
        assert "interval.ms=2000" in out, out
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "client-metrics",
             "--entity-name", name, "--add-config", "interval.ms=3000")
        eventually(lambda: _assert_in("interval.ms=3000", tool("ClientMetricsCommand", "--bootstrap-server", bs,
                                                                 "--describe", "--name", name)))
        bad = tool("ClientMetricsCommand", "--bootstrap-server", bs, "--alter", "--name", name,
                   "--interval", "5", ok=False)
        assert "InvalidRequestException" in bad or "interval must be between 100 and 3600000" in bad, bad
    finally:
        out = tool("ClientMetricsCommand", "--bootstrap-server", bs, "--delete", "--name", name)
    eventually(lambda: _assert_not_in(name, tool("ClientMetricsCommand", "--bootstrap-server", bs, "--list")))


def _assert_in(needle: str, hay: str) -> None:
    assert needle in hay, hay


def _assert_not_in(needle: str, hay: str) -> None:
    assert needle not in hay, hay
