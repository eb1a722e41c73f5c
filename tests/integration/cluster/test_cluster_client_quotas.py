"""Client quotas on three nodes: AlterClientQuotas sent to one node is forwarded to the active
controller, which validates against its image and appends ClientQuota records (its errors come back
through the broker); every node describes the quotas, also after a restart (replayed from the
metadata log). The same test runs on three Apache Kafka 4.3 nodes with `--broker=kafka`."""
from __future__ import annotations

import sys
import time

import pytest

from tests.conftest import ROOT, broker_kind
from tests.integration.admin.test_client_quotas import EXACT, INVALID_REQUEST, alter, describe, key
from tests.support.helpers import RawClient

pytestmark = pytest.mark.serial  # three processes (three JVMs on the oracle)


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    """(node id -> bootstrap, restart(node) or None)."""
    kind = broker_kind(request.config)
    if kind == "kafka":
        sys.path.insert(0, str(ROOT))
        from scripts.apache_kafka import KafkaCluster
        kc = KafkaCluster(3, work_dir=tmp_path_factory.mktemp("kafka")).start(timeout=240)
        try:
            yield {n: f"127.0.0.1:{kc.ports[n]}" for n in kc.ids}, None
        finally:
            kc.stop()
        return
    if kind != "minikafka":
        pytest.skip("needs three brokers this test starts")
    from tests.support.cluster_harness import Cluster
    c = Cluster(tmp_path_factory.mktemp("cluster"), config={
        "broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300"}).start()
    try:
        yield {n: c.nodes[n].bootstrap for n in c.ids}, c.restart
    finally:
        for n in c.ids:
            c.kill(n)
        c.stop()


def eventually(fn, expected, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value == expected or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def on(addr: str, fn, *args, **kwargs):
    with RawClient(addr, timeout=40) as c:
        return fn(c, *args, **kwargs)


def test_quotas_altered_through_one_node_described_on_every_node(cluster):
    nodes, restart = cluster
    u, uc = {"user": "q-alice"}, {"user": "q-alice", "client-id": "q-app"}
    assert on(nodes[1], alter, [(u, {"producer_byte_rate": 1048576}), (uc, {"request_percentage": 40.0})]) == {
        key(u): (0, None), key(uc): (0, None)}
    want = {key(u): {"producer_byte_rate": 1048576.0}, key(uc): {"request_percentage": 40.0}}
    for n in nodes:
        assert eventually(lambda n=n: on(nodes[n], describe, [("user", EXACT, "q-alice")]), want) == want
    # the controller validates: its errors and messages come back through the broker
    assert on(nodes[2], alter, [(u, {"producer_byte_rate": -1}), ({"client-id": "q-x"}, {"nope": 1})]) == {
        key(u): (INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
        key({"client-id": "q-x"}): (INVALID_REQUEST, "Invalid configuration key nope")}
    assert on(nodes[3], alter, [(u, {"producer_byte_rate": 7})], validate_only=True) == {key(u): (0, None)}
    assert on(nodes[3], describe, [("user", EXACT, "q-alice")]) == want
    if restart is not None:  # a restarted node replays its quotas from the metadata log
        restart(3)
        assert eventually(lambda: _describe_or_none(nodes[3]), want, timeout=60) == want
    assert on(nodes[3], alter, [(u, {"producer_byte_rate": None}), (uc, {"request_percentage": None})]) == {
        key(u): (0, None), key(uc): (0, None)}
    for n in nodes:
        assert eventually(lambda n=n: on(nodes[n], describe, [("user", EXACT, "q-alice")]), {}) == {}


def _describe_or_none(addr: str):
    try:
        return on(addr, describe, [("user", EXACT, "q-alice")])
    except OSError:
        return None
