"""CLIENT_METRICS config resources (KIP-714 subscriptions, ConfigResource type 16) on a three-node
cluster go through the metadata log as Kafka's ConfigRecords do: set through one node, every node
describes and lists them and hands them to its clients (GetTelemetrySubscriptions); deleted through
another node, gone everywhere; a node killed and restarted replays them (no node keeps a file of them)."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import (DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
                                  IncrementalAlterConfigsResponse)
from kafka.protocol.admin.configs import ListConfigResourcesRequest, ListConfigResourcesResponse

from minikafka.protocol.messages import GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]  # three processes with short timeouts

CONFIG = {"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "2000",
          "broker.heartbeat.interval.ms": "400"}
CLIENT_METRICS = 16


def describe(c: Cluster, n: int, name: str) -> dict[str, tuple[str, int]] | None:
    R = DescribeConfigsRequest.DescribeConfigsResource
    req = DescribeConfigsRequest(resources=[R(resource_type=CLIENT_METRICS, resource_name=name,
                                              configuration_keys=None)], include_synonyms=True)
    try:
        with RawClient(c.nodes[n].bootstrap, timeout=3.0) as raw:
            (res,) = raw.request(req, 1, DescribeConfigsResponse).results
    except OSError:
        return None
    assert res.error_code == 0, res
    return {e.name: (e.value, e.config_source) for e in res.configs}


def incremental(c: Cluster, n: int, name: str, ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=[R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])
    with RawClient(c.nodes[n].bootstrap, timeout=30.0) as raw:
        (res,) = raw.request(req, 1, IncrementalAlterConfigsResponse).responses
    return res.error_code, res.error_message


def listed(c: Cluster, n: int) -> list[str]:
    with RawClient(c.nodes[n].bootstrap, timeout=3.0) as raw:
        resp = raw.request(ListConfigResourcesRequest(resource_types=[CLIENT_METRICS]), 1, ListConfigResourcesResponse)
    return sorted(r.resource_name for r in resp.config_resources)


def subscription(c: Cluster, n: int, client_id: str) -> tuple[list[str], int]:
    with RawClient(c.nodes[n].bootstrap, timeout=3.0, client_id=client_id) as raw:
        resp = raw.request(GetTelemetrySubscriptionsRequest(client_instance_id=None), 0,
                           GetTelemetrySubscriptionsResponse)
    assert resp.error_code == 0
    return list(resp.requested_metrics), resp.push_interval_ms


def everywhere(c: Cluster, name: str, want: dict[str, tuple[str, int]], nodes=None) -> None:
    def seen() -> bool:
        for n in nodes or c.brokers:
            got = describe(c, n, name)
            if got is None or any(got.get(k) != v for k, v in want.items()):
                return False
        return True
    wait_until(seen, timeout=20, interval=0.1, what=f"{name}: {want} on every node")


def test_client_metrics_subscriptions_are_cluster_wide_and_survive_restart(tmp_path):
    with running(Cluster(tmp_path, config=CONFIG)) as c:
        assert incremental(c, 1, "apps", [("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "2000"),
                                          ("match", 0, "client_id=app-.*")]) == (0, None)
        everywhere(c, "apps", {"metrics": ("org.apache.kafka.producer.", 7), "interval.ms": ("2000", 7)})
        for n in c.brokers:
            assert listed(c, n) == ["apps"], n
            assert subscription(c, n, "app-1") == (["org.apache.kafka.producer."], 2000), n
            assert subscription(c, n, "other") == ([], 300000), n
        # refused as Kafka's ClientMetricsConfigs.validate refuses it, and nothing changes
        assert incremental(c, 2, "apps", [("interval.ms", 0, "5")])[0] == 42
        assert incremental(c, 3, "apps", [("match", 0, "nope")])[0] == 40
        # a DELETE through node 3
        assert incremental(c, 3, "apps", [("match", 1, None)]) == (0, None)
        everywhere(c, "apps", {"match": ("", 5), "interval.ms": ("2000", 7)})

        # kill -9 node 2, change the subscription meanwhile, start it again: the replayed log holds it
        c.kill(2)
        assert incremental(c, 1, "apps", [("interval.ms", 0, "3000")]) == (0, None)
        c.restart(2)
        everywhere(c, "apps", {"interval.ms": ("3000", 7)}, nodes=[2])
        wait_until(lambda: subscription(c, 2, "anyone") == (["org.apache.kafka.producer."], 3000), timeout=20,
                   interval=0.2, what="node 2 hands out the replayed subscription")
        # every key deleted: no subscription any more, on every node
        assert incremental(c, 2, "apps", [("metrics", 1, None), ("interval.ms", 1, None)]) == (0, None)
        wait_until(lambda: all(listed(c, n) == [] for n in c.brokers), timeout=20, interval=0.2,
                   what="the subscription gone everywhere")
        for n in c.ids:
            assert not (c.nodes[n].data_dir / "__minikafka_client_metrics.json").exists(), n
            assert "Traceback" not in c.nodes[n].log_text(), n
