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


def describe(client, name: str, keys: list[str] | None = None):
    resp = client.request(DescribeConfigsRequest(resources=[D(resource_type=CLIENT_METRICS, resource_name=name,
                                                                configuration_keys=keys)],
                                                 include_synonyms=True, include_documentation=False), 4)
    (r,) = resp.results
    return r.error_code, sorted((c.name, c.value, c.config_source, c.read_only, c.is_sensitive, list(c.synonyms))
                                for c in r.configs)


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
            # only the keys set, CLIENT_METRICS_CONFIG (7), no synonyms
            assert entries == [("interval.ms", "1000", 7, False, False, []),
                               ("match", "client_id=app-.*", 7, False, False, []),
                               ("metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.", 7, False, False,
                                [])], entries
            assert (name, CLIENT_METRICS) in listed(client, 0)[1]
            assert (name, CLIENT_METRICS) in listed(client, 1, [CLIENT_METRICS])[1]
        eventually(shown)
        assert describe(client, name, ["interval.ms"])[1] == [("interval.ms", "1000", 7, False, False, [])]
        # list keys take APPEND / SUBTRACT
        assert alter(client, name, ("metrics", APPEND, "org.apache.kafka.admin."))[0] == 0
        assert alter(client, name, ("metrics", SUBTRACT, "org.apache.kafka.consumer."))[0] == 0
        eventually(lambda: _assert_value(client, name, "metrics", "org.apache.kafka.producer.,org.apache.kafka.admin."))
        # validate_only changes nothing
        assert alter(client, name, ("interval.ms", SET, "2000"), validate_only=True)[0] == 0
        eventually(lambda: _assert_value(client, name, "interval.ms", "1000"))
    finally:
        assert alter(client, name, ("metrics", DELETE, None), ("interval.ms", DELETE, None),
                     ("match", DELETE, None))[0] == 0

    def gone():
        assert describe(client, name) == (0, [])  # an unknown subscription is no error: nothing set
        assert (name, CLIENT_METRICS) not in listed(client, 0)[1]
    eventually(gone)


def _assert_value(client, name: str, key: str, value: str) -> None:
    entries = dict((e[0], e[1]) for e in describe(client, name)[1])
    assert entries.get(key) == value, entries


@pytest.mark.parametrize("ops,code", [
    ([("nope", SET, "1")], 42),  # unknown key: INVALID_REQUEST
    ([("interval.ms", SET, "50")], 42),  # below 100 ms
    ([("interval.ms", SET, "3600001")], 42),  # above one hour
    ([("interval.ms", SET, "soon")], 40),  # not an INT: INVALID_CONFIG
    ([("match", SET, "client_id")], 40),  # not name=regex
    ([("match", SET, "colour=red")], 40),  # not a client attribute
    ([("match", SET, "client_id=[")], 40),  # not a regex
    ([("interval.ms", APPEND, "100")], 40),  # APPEND to a non-list key
])
def test_bad_subscription_answers_kafkas_code(client, ops, code):
    name = f"bad-{uuid.uuid4().hex[:8]}"
    assert alter(client, name, *ops)[0] == code
    assert describe(client, name) == (0, [])
    assert (name, CLIENT_METRICS) not in listed(client, 0)[1]


def test_empty_subscription_name_is_invalid_request(client):
    assert alter(client, "", ("interval.ms", SET, "1000"))[0] == 42
    assert describe(client, "")[0] == 42


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
