"""UnregisterBroker in a cluster (`kafka-cluster unregister --bootstrap-server ... --id N`, Kafka's own
tool): a broker's listener forwards it to the active controller, which takes the broker out of every ISR
and leadership and removes its registration; every node's Metadata stops listing it; an unknown id is
BROKER_ID_NOT_REGISTERED; the broker, started again, registers again."""
from __future__ import annotations

import sys

import pytest

from minikafka.protocol.messages import UnregisterBrokerRequest, UnregisterBrokerResponse
from tests.conftest import ROOT
from tests.support.cluster_harness import Cluster, brokers, running
from tests.support.helpers import RawClient, metadata_raw, wait_until

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]


def test_unregister_a_stopped_broker_with_kafka_cluster_tool(tmp_path):
    lab.fetch()
    with running(Cluster(tmp_path, size=3, broker_only=1)) as c:
        gone = 4
        with RawClient(c.nodes[1].bootstrap) as cl:
            from kafka.protocol.admin import CreateTopicsRequest
            T = CreateTopicsRequest.CreatableTopic
            resp = cl.request(CreateTopicsRequest(topics=[T(name="un", num_partitions=4, replication_factor=2,
                                                            assignments=[], configs=[])], timeout_ms=30000), 5)
            assert resp.topics[0].error_code == 0, resp
        c.kill(gone)
        res = lab.run_tool("kafka-cluster", ["unregister", "--bootstrap-server", c.nodes[2].bootstrap,
                                             "--id", str(gone)], timeout=90)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        for n in (1, 2, 3):
            wait_until(lambda n=n: brokers(c, n) == {1, 2, 3}, timeout=20, what=f"node {n} without broker {gone}")

        def moved() -> bool:
            with RawClient(c.nodes[1].bootstrap) as cl:
                (t,) = metadata_raw(cl, ["un"]).topics
                return all(p.leader_id != gone and gone not in p.isr_nodes for p in t.partitions)
        wait_until(moved, timeout=20, what=f"leadership and ISRs without broker {gone}")
        with RawClient(c.nodes[3].bootstrap) as cl:
            again = cl.request(UnregisterBrokerRequest(broker_id=gone), 0, UnregisterBrokerResponse)
            assert (again.error_code, again.error_message) == (102, f"Broker ID {gone} is not currently registered")
        c.restart(gone)
        wait_until(lambda: brokers(c, 1) == {1, 2, 3, 4}, timeout=30, what=f"broker {gone} registered again")
