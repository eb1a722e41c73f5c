"""Eligible leader replicas (KIP-966) on a single node, as Kafka 4.3.1 shows them: the feature finalized at 1 in
ApiVersions, DescribeTopicPartitions' eligible_leader_replicas / last_known_elr empty (one replica is always the
whole ISR, even with min.insync.replicas=2: the effective min ISR is capped by the replication factor), and
`kafka-topics --describe` printing the Elr / LastKnownElr columns empty. Differential (both brokers)."""
from __future__ import annotations

import re
import uuid

from kafka.protocol.admin import (CreateTopicsRequest, CreateTopicsResponse, DescribeTopicPartitionsRequest,
                                  DescribeTopicPartitionsResponse)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.support.helpers import RawClient, wait_until
from tests.integration.clients.test_reference_lab import tool

ELR = "eligible.leader.replicas.version"


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    C = CreateTopicsRequest.CreatableTopic
    with RawClient(bootstrap, timeout=40) as cl:
        resp = cl.request(CreateTopicsRequest(topics=[C(
            name=topic, num_partitions=2, replication_factor=1, assignments=[],
            configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
            timeout_ms=30000, validate_only=False), 7, CreateTopicsResponse)
    assert resp.topics[0].error_code == 0, resp


def _dtp(bootstrap: str, topic: str):
    Q = DescribeTopicPartitionsRequest
    with RawClient(bootstrap) as cl:
        return cl.request(Q(topics=[Q.TopicRequest(name=topic)], response_partition_limit=100, cursor=None), 0,
                          DescribeTopicPartitionsResponse)


def test_feature_finalized_in_api_versions(broker):
    with RawClient(broker.bootstrap) as cl:
        r = cl.request(ApiVersionsRequest(client_software_name="minikafka-tests", client_software_version="1"), 4,
                       ApiVersionsResponse)
    assert {f.name: (f.min_version, f.max_version) for f in r.supported_features}[ELR] == (0, 1)
    assert {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}[ELR] == (1, 1)


def test_single_replica_partitions_have_no_eligible_leader_replicas(broker):
    topic = f"elr-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, topic, {"min.insync.replicas": "2"})

    def described():
        r = _dtp(broker.bootstrap, topic)
        return r.topics and r.topics[0].error_code == 0 and len(r.topics[0].partitions) == 2 and \
            all(p.leader_id >= 0 for p in r.topics[0].partitions)
    wait_until(described, timeout=20, what="the topic's partitions led")
    for p in _dtp(broker.bootstrap, topic).topics[0].partitions:
        assert p.isr_nodes == p.replica_nodes == [p.leader_id]
        assert not p.eligible_leader_replicas and not p.last_known_elr
    _, out = tool("kafka-topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", topic)
    assert re.search(rf"Topic: {topic}\s+TopicId: \S+\s+PartitionCount: 2\s+ReplicationFactor: 1\s+"
                     r"Configs: .*min\.insync\.replicas=2", out), out
    rows = re.findall(rf"^\s*Topic: {topic}\s+Partition: (\d)\s+Leader: (\d+)\s+Replicas: \2\s+Isr: \2\s+"
                      r"Elr: ?\s+LastKnownElr: ?\s*$", out, re.M)
    assert [r[0] for r in rows] == ["0", "1"], out


def test_min_insync_replicas_is_cluster_wide(broker):
    """Kafka 4.3 writes min.insync.replicas into the cluster-wide dynamic configs when it formats a cluster with
    ELR on, refuses it on a single broker and refuses removing it (INVALID_CONFIG, its messages)."""
    b = broker.bootstrap
    default = ("--entity-type", "brokers", "--entity-default")
    _, out = tool("kafka-configs", "--bootstrap-server", b, "--describe", *default)
    assert re.search(r"^\s*min\.insync\.replicas=1 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:"
                     r"min\.insync\.replicas=1\}", out, re.M), out
    _, out = tool("kafka-configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-name",
                  "1", "--add-config", "min.insync.replicas=2", ok=False)
    assert "InvalidConfigurationException: Broker-level min.insync.replicas cannot be altered while ELR is " \
           "enabled." in out, out
    _, out = tool("kafka-configs", "--bootstrap-server", b, "--alter", *default, "--delete-config",
                  "min.insync.replicas", ok=False)
    assert "InvalidConfigurationException: Cluster-level min.insync.replicas cannot be removed while ELR is " \
           "enabled." in out, out


def test_turning_elr_on_makes_min_insync_replicas_cluster_wide(broker):
    """ELR off: a broker-level min.insync.replicas is taken and the cluster default may go; turned on again,
    Kafka's safety records put min.insync.replicas back into the cluster default (the static value) and drop
    the broker's own."""
    b = broker.bootstrap
    one = ("--entity-type", "brokers", "--entity-name", "1")
    default = ("--entity-type", "brokers", "--entity-default")
    try:
        tool("kafka-features", "--bootstrap-server", b, "downgrade", "--feature", f"{ELR}=0")
        tool("kafka-configs", "--bootstrap-server", b, "--alter", *one, "--add-config", "min.insync.replicas=1")
        tool("kafka-configs", "--bootstrap-server", b, "--alter", *default, "--delete-config", "min.insync.replicas")
    finally:
        tool("kafka-features", "--bootstrap-server", b, "upgrade", "--feature", f"{ELR}=1")

    def settled():
        per_broker, _ = tool("kafka-configs", "--bootstrap-server", b, "--describe", *one)
        cluster, _ = tool("kafka-configs", "--bootstrap-server", b, "--describe", *default)
        return "min.insync.replicas" not in per_broker.stdout and \
            "min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}" \
            in cluster.stdout
    wait_until(settled, timeout=20, what="min.insync.replicas cluster-wide again")
