"""GROUP config resources (ConfigResource type 32) on a three-node cluster go through the metadata log, as
Kafka's ConfigRecords do: set through one node (confluent-kafka's AdminClient, raw IncrementalAlterConfigs
and AlterConfigs), every node describes them and its coordinators and share-partition leaders use them;
deleted through another node, gone everywhere; after kill -9 and a restart the replayed log still holds
them (no node keeps a group-config file of its own)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                   ResourceType)
from kafka.protocol.admin import (AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest,
                                  DescribeConfigsResponse, IncrementalAlterConfigsRequest,
                                  IncrementalAlterConfigsResponse)

from tests.support.cluster_harness import Cluster, running
from tests.support.group_helpers import produce
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]  # three processes with short timeouts

CONFIG = {"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "2000",
          "broker.heartbeat.interval.ms": "400", "group.initial.rebalance.delay.ms": "0",
          "offsets.topic.num.partitions": "3", "share.coordinator.state.topic.num.partitions": "3"}
GROUP_CONFIG = 32
SOURCE_GROUP, SOURCE_DEFAULT = 8, 5
INVALID_CONFIG = 40
RESET, LOCK, SESSION = "share.auto.offset.reset", "share.record.lock.duration.ms", "consumer.session.timeout.ms"


def describe(c: Cluster, n: int, group: str) -> dict[str, tuple[str, int]] | None:
    """name -> (value, source) of `group`'s configs as node n answers (None: no answer)."""
    R = DescribeConfigsRequest.DescribeConfigsResource
    req = DescribeConfigsRequest(resources=[R(resource_type=GROUP_CONFIG, resource_name=group,
                                              configuration_keys=None)], include_synonyms=True)
    try:
        with RawClient(c.nodes[n].bootstrap, timeout=3.0) as raw:
            (res,) = raw.request(req, 1, DescribeConfigsResponse).results
    except OSError:
        return None
    assert res.error_code == 0, res
    return {e.name: (e.value, e.config_source) for e in res.configs}


def incremental(c: Cluster, n: int, group: str, ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
        resource_type=GROUP_CONFIG, resource_name=group,
        configs=[R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])
    with RawClient(c.nodes[n].bootstrap, timeout=30.0) as raw:
        (res,) = raw.request(req, 1, IncrementalAlterConfigsResponse).responses
    return res.error_code, res.error_message


def alter(c: Cluster, n: int, group: str, props: dict[str, str]) -> tuple[int, str | None]:
    R = AlterConfigsRequest.AlterConfigsResource
    req = AlterConfigsRequest(validate_only=False, resources=[R(
        resource_type=GROUP_CONFIG, resource_name=group,
        configs=[R.AlterableConfig(name=k, value=v) for k, v in props.items()])])
    with RawClient(c.nodes[n].bootstrap, timeout=30.0) as raw:
        (res,) = raw.request(req, 1, AlterConfigsResponse).responses
    return res.error_code, res.error_message


def everywhere(c: Cluster, group: str, want: dict[str, tuple[str, int]], nodes=None) -> None:
    """Wait until every node (or `nodes`) describes `group` with these (value, source) pairs."""
    def seen() -> bool:
        for n in nodes or c.brokers:
            got = describe(c, n, group)
            if got is None or any(got.get(k) != v for k, v in want.items()):
                return False
        return True
    wait_until(seen, timeout=20, interval=0.1, what=f"{group}: {want} on every node")


def _leader(c: Cluster, topic: str) -> int:
    with RawClient(c.nodes[c.brokers[0]].bootstrap, timeout=3.0) as raw:
        md = metadata_raw(raw, [topic])
    return md.topics[0].partitions[0].leader_id if md.topics and md.topics[0].partitions else -1


def test_group_configs_are_cluster_wide_and_survive_restart(tmp_path):
    with running(Cluster(tmp_path, config=CONFIG)) as c:
        # confluent-kafka through node 1 only; nodes 2 and 3 describe it (GROUP_CONFIG)
        res = ConfigResource(ResourceType.GROUP, "cg", incremental_configs=[
            ConfigEntry(SESSION, "50000", incremental_operation=AlterConfigOpType.SET)])
        admin = AdminClient({"bootstrap.servers": c.nodes[1].bootstrap})
        admin.incremental_alter_configs([res], request_timeout=30)[res].result(30)
        everywhere(c, "cg", {SESSION: ("50000", SOURCE_GROUP)})

        # raw IncrementalAlterConfigs through node 2, read back on 1 and 3; then a DELETE through node 3
        assert incremental(c, 2, "sg", [(RESET, 0, "earliest"), (LOCK, 0, "20000")]) == (0, None)
        assert describe(c, 2, "sg")[RESET] == ("earliest", SOURCE_GROUP)  # the answering node at once
        everywhere(c, "sg", {RESET: ("earliest", SOURCE_GROUP), LOCK: ("20000", SOURCE_GROUP)})
        assert incremental(c, 3, "sg", [(LOCK, 1, None)]) == (0, None)
        everywhere(c, "sg", {RESET: ("earliest", SOURCE_GROUP), LOCK: ("30000", SOURCE_DEFAULT)})

        # AlterConfigs replaces the whole set of the group's overrides
        assert alter(c, 1, "cg", {"consumer.heartbeat.interval.ms": "6000"}) == (0, None)
        everywhere(c, "cg", {SESSION: ("45000", SOURCE_DEFAULT), "consumer.heartbeat.interval.ms": ("6000", SOURCE_GROUP)})

        # refused as Kafka's GroupConfig.validate refuses it, and nothing changes
        code, message = incremental(c, 3, "sg", [(LOCK, 0, "999999")])
        assert code == INVALID_CONFIG and "group.share.max.record.lock.duration.ms" in message, message
        code, _message = incremental(c, 1, "sg", [("no.such.config", 0, "1")])
        assert code == INVALID_CONFIG

        # kill -9 node 2, change the group meanwhile, start it again: the replayed log holds it all
        c.kill(2)
        assert incremental(c, 1, "sg", [(LOCK, 0, "25000")]) == (0, None)
        c.restart(2)
        everywhere(c, "sg", {RESET: ("earliest", SOURCE_GROUP), LOCK: ("25000", SOURCE_GROUP)}, nodes=[2])
        everywhere(c, "cg", {SESSION: ("45000", SOURCE_DEFAULT), "consumer.heartbeat.interval.ms": ("6000", SOURCE_GROUP)},
                   nodes=[2])
        for n in c.ids:
            assert not (c.nodes[n].data_dir / "__minikafka_group_configs.json").exists(), n
            assert "Traceback" not in c.nodes[n].log_text(), n


def test_share_partition_leader_on_another_node_uses_the_group_config(tmp_path):
    """share.auto.offset.reset=earliest set through a node that does not lead the partition: the
    share-partition leader starts the group at the log start, so records produced before are delivered."""
    with running(Cluster(tmp_path, config=CONFIG)) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic("early", 1, 3)])["early"].result(30)
        leader = wait_until(lambda: max(_leader(c, "early"), 0), 30, 0.2, "the topic's leader")
        values = produce(c.bootstrap, "early", 1, 5)
        other = next(n for n in c.brokers if n != leader)
        assert incremental(c, other, "sg-early", [(RESET, 0, "earliest")]) == (0, None)
        everywhere(c, "sg-early", {RESET: ("earliest", SOURCE_GROUP)}, nodes=[leader])
        consumer = ShareConsumer({"bootstrap.servers": c.bootstrap, "group.id": "sg-early"})
        consumer.subscribe(["early"])
        got: set[bytes] = set()
        try:
            end = time.monotonic() + 60
            while len(got) < len(values) and time.monotonic() < end:
                got.update(m.value() for m in consumer.poll(1.0) if m.error() is None)
        finally:
            consumer.close()
        assert got == set(values)
