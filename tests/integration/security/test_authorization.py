"""Authorization matrix: for every API minikafka serves, a client with exactly the ACLs Kafka's
handler checks gets through, and without each one gets Kafka's error code in Kafka's place.

Runs unchanged against the Apache Kafka oracle (`--broker=kafka`, configured as tests/support/authz_helpers.py
describes). Each case lists its grants as (resource type, which name, operation, error when this one
grant is missing); the case runs once with each grant left out, then with all of them, then with all of
them and a DENY of each one in turn (which must give the same error as its absence). Calls go over
raw kafka.protocol requests from CLIENT_HOST as User:ANONYMOUS; the allowed call must return
`allowed` (an error code, or a set of acceptable codes for calls whose success needs protocol state
the case does not build: then any non-authorization answer shows the check passed).
"""
from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import pytest
from kafka.protocol.admin import (AlterConfigsRequest, CreatePartitionsRequest, CreateTopicsRequest,
                                  DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
                                  DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
                                  DescribeProducersRequest, DescribeTopicPartitionsRequest,
                                  IncrementalAlterConfigsRequest, ListGroupsRequest, UpdateFeaturesRequest)
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
                                     ListOffsetsRequest, OffsetCommitRequest, OffsetDeleteRequest,
                                     OffsetFetchRequest, OffsetForLeaderEpochRequest, SyncGroupRequest)
from kafka.protocol.metadata import FindCoordinatorRequest

from minikafka.broker.security import acl as A
from tests.support.authz_helpers import (AUTH_ERRORS, CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED, TXN_DENIED, Admin,
                                 binding, bootstrap_admin, describe_acls, secured_broker)
from tests.support.authz_helpers import create_acls as authz_create_acls
from tests.support.helpers import RawClient, build_batch, fetch_once, metadata_raw, produce_raw
from tests.support.txn_helpers import (add_offsets, add_partitions, describe_transactions, end_txn, find_txn_coordinator,
                               init_producer_id, list_transactions, produce_txn, txn_batch, txn_offset_commit,
                               write_txn_markers)

NOT_AUTH = "any answer but an authorization error"


@pytest.fixture(scope="module")
def secured(request, tmp_path_factory):
    yield from secured_broker(request, tmp_path_factory)


@pytest.fixture(scope="module")
def admin(secured):
    a = bootstrap_admin(secured)
    find_txn_coordinator(a.client, "warm-up")  # creates __transaction_state
    a.client.request(FindCoordinatorRequest(key="warm-up", key_type=0), 3)  # and __consumer_offsets
    yield a
    a.close()


_n = itertools.count()


@dataclass
class Res:
    """The names one case uses (fresh per run) and what its setup made."""
    topic: str
    group: str
    txn: str
    pid: int = -1
    epoch: int = -1
    extra: dict = field(default_factory=dict)

    def name(self, key: str) -> str:
        return {"topic": self.topic, "group": self.group, "txn": self.txn, "cluster": A.CLUSTER_NAME}[key]


def fresh() -> Res:
    tag = f"{next(_n)}-{uuid.uuid4().hex[:6]}"
    return Res(f"authz-t-{tag}", f"authz-g-{tag}", f"authz-x-{tag}")


# -- the calls (client side) ---------------------------------------------------------------------
def produce(c: RawClient, r: Res) -> int:
    return produce_raw(c, r.topic, build_batch([b"x"])).error_code


def produce_transactional(c: RawClient, r: Res) -> int:
    return produce_txn(c, r.txn, r.topic, 0, txn_batch(r.pid, r.epoch, 0, [b"x"])).error_code


def produce_idempotent(c: RawClient, r: Res) -> int:
    """An idempotent batch needs only WRITE on the topic (Kafka 4.x checks no IDEMPOTENT_WRITE here)."""
    return produce_txn(c, None, r.topic, 0, txn_batch(r.pid, r.epoch, 0, [b"x"], transactional=False)).error_code


def fetch(c: RawClient, r: Res) -> int:
    return fetch_once(c, r.topic, 0, 0).error_code


def metadata(c: RawClient, r: Res) -> int:
    (t,) = metadata_raw(c, [r.topic]).topics
    return t.error_code


def metadata_auto_create(c: RawClient, r: Res) -> int:
    """Auto-creation; Kafka answers UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE until it is done."""
    (t,) = metadata_raw(c, [r.topic], auto_create=True).topics
    for _ in range(100):
        if t.error_code not in (3, 5):
            break
        time.sleep(0.1)
        (t,) = metadata_raw(c, [r.topic]).topics
    return t.error_code


def list_offsets(c: RawClient, r: Res) -> int:
    P = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    resp = c.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=r.topic, partitions=[P(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]), 7)
    return resp.topics[0].partitions[0].error_code


def offset_for_leader_epoch(c: RawClient, r: Res) -> int:
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    resp = c.request(OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(topic=r.topic, partitions=[
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])]), 4)
    return resp.topics[0].partitions[0].error_code


def init_idempotent(c: RawClient, r: Res) -> int:
    return init_producer_id(c, None).error_code


def init_transactional(c: RawClient, r: Res) -> int:
    return init_producer_id(c, r.txn).error_code


def _codes(errors: dict) -> int:
    """The first authorization error of a per-partition answer, else the first error."""
    codes = list(errors.values())
    return next((x for x in codes if x in AUTH_ERRORS), codes[0])


def add_partitions_to_txn(c: RawClient, r: Res) -> int:
    return _codes(add_partitions(c, r.txn, r.pid, r.epoch, {r.topic: [0]}))


def add_offsets_to_txn(c: RawClient, r: Res) -> int:
    return add_offsets(c, r.txn, r.pid, r.epoch, r.group)


def end_transaction(c: RawClient, r: Res) -> int:
    return end_txn(c, r.txn, r.pid, r.epoch, True)


def txn_offset_commit_call(c: RawClient, r: Res) -> int:
    return _codes(txn_offset_commit(c, r.txn, r.group, r.pid, r.epoch, {(r.topic, 0): 1}, version=3))


def write_markers(c: RawClient, r: Res) -> int:
    return _codes(write_txn_markers(c, r.pid, r.epoch, False, 0, {r.topic: [0]}))


def find_group_coordinator(c: RawClient, r: Res) -> int:
    return c.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[r.group]), 4).coordinators[0].error_code


def find_txn_coordinator_call(c: RawClient, r: Res) -> int:
    return c.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[r.txn]), 4).coordinators[0].error_code


def join_group(c: RawClient, r: Res) -> int:
    return c.request(JoinGroupRequest(group_id=r.group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                      member_id="", group_instance_id=None, protocol_type="consumer",
                                      protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                           metadata=b"")],
                                      reason=None), 7).error_code


def sync_group(c: RawClient, r: Res) -> int:
    return c.request(SyncGroupRequest(group_id=r.group, generation_id=1, member_id="m", group_instance_id=None,
                                      protocol_type="consumer", protocol_name="range", assignments=[]), 5).error_code


def heartbeat(c: RawClient, r: Res) -> int:
    return c.request(HeartbeatRequest(group_id=r.group, generation_id=1, member_id="m", group_instance_id=None),
                     4).error_code


def leave_group(c: RawClient, r: Res) -> int:
    resp = c.request(LeaveGroupRequest(group_id=r.group, members=[
        LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None, reason=None)]), 5)
    return resp.error_code or resp.members[0].error_code


def offset_commit(c: RawClient, r: Res) -> int:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    resp = c.request(OffsetCommitRequest(group_id=r.group, generation_id_or_member_epoch=-1, member_id="",
                                         group_instance_id=None, topics=[T(name=r.topic, partitions=[
                                             T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                            committed_leader_epoch=-1,
                                                                            committed_metadata="")])]), 8)
    return resp.topics[0].partitions[0].error_code


def offset_fetch(c: RawClient, r: Res) -> int:
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    resp = c.request(OffsetFetchRequest(groups=[G(group_id=r.group, topics=[
        G.OffsetFetchRequestTopics(name=r.topic, partition_indexes=[0])])], require_stable=False), 8)
    g = resp.groups[0]
    return g.error_code or g.topics[0].partitions[0].error_code


def describe_groups(c: RawClient, r: Res) -> int:
    return c.request(DescribeGroupsRequest(groups=[r.group], include_authorized_operations=False), 5) \
        .groups[0].error_code


def list_groups_sees(c: RawClient, r: Res) -> int:
    resp = c.request(ListGroupsRequest(states_filter=[]), 4)
    return 0 if r.group in {g.group_id for g in resp.groups} else GROUP_DENIED


def delete_groups(c: RawClient, r: Res) -> int:
    return c.request(DeleteGroupsRequest(groups_names=[r.group]), 2).results[0].error_code


def offset_delete(c: RawClient, r: Res) -> int:
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    resp = c.request(OffsetDeleteRequest(group_id=r.group, topics=[T(name=r.topic, partitions=[
        T.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    return resp.error_code or resp.topics[0].partitions[0].error_code


def consumer_group_heartbeat(c: RawClient, r: Res) -> int:
    from tests.support.consumer_protocol_helpers import heartbeat as cg_heartbeat
    return cg_heartbeat(c, r.group, str(uuid.uuid4()), 0, topics=[r.topic]).error_code


def consumer_group_describe(c: RawClient, r: Res) -> int:
    from tests.support.consumer_protocol_helpers import describe as cg_describe
    return cg_describe(c, r.group)[r.group].error_code


def create_topics(c: RawClient, r: Res) -> int:
    T = CreateTopicsRequest.CreatableTopic
    resp = c.request(CreateTopicsRequest(topics=[T(name=r.topic, num_partitions=1, replication_factor=1,
                                                   assignments=[], configs=[])],
                                         timeout_ms=30000, validate_only=False), 7)
    return resp.topics[0].error_code


def delete_topics(c: RawClient, r: Res) -> int:
    resp = c.request(DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=r.topic,
                                                                                       topic_id=uuid.UUID(int=0))],
                                         timeout_ms=30000), 6)
    return resp.responses[0].error_code


def create_partitions(c: RawClient, r: Res) -> int:
    T = CreatePartitionsRequest.CreatePartitionsTopic
    resp = c.request(CreatePartitionsRequest(topics=[T(name=r.topic, count=2, assignments=None)], timeout_ms=30000,
                                             validate_only=True), 3)
    return resp.results[0].error_code


def delete_records(c: RawClient, r: Res) -> int:
    T = DeleteRecordsRequest.DeleteRecordsTopic
    resp = c.request(DeleteRecordsRequest(topics=[T(name=r.topic, partitions=[
        T.DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=30000), 2)
    return resp.topics[0].partitions[0].error_code


def _describe_configs(c: RawClient, rtype: int, name: str) -> int:
    R = DescribeConfigsRequest.DescribeConfigsResource
    resp = c.request(DescribeConfigsRequest(resources=[R(resource_type=rtype, resource_name=name,
                                                         configuration_keys=None)],
                                            include_synonyms=False, include_documentation=False), 4)
    return resp.results[0].error_code


def describe_topic_configs(c: RawClient, r: Res) -> int:
    return _describe_configs(c, 2, r.topic)


def describe_group_configs(c: RawClient, r: Res) -> int:
    return _describe_configs(c, 32, r.group)


def describe_broker_configs(c: RawClient, r: Res) -> int:
    return _describe_configs(c, 4, "1")


def _incremental(c: RawClient, rtype: int, name: str, key: str, value: str) -> int:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    resp = c.request(IncrementalAlterConfigsRequest(resources=[R(resource_type=rtype, resource_name=name, configs=[
        R.AlterableConfig(name=key, config_operation=0, value=value)])], validate_only=True), 1)
    return resp.responses[0].error_code


def incremental_alter_topic(c: RawClient, r: Res) -> int:
    return _incremental(c, 2, r.topic, "retention.ms", "3600000")


def incremental_alter_group(c: RawClient, r: Res) -> int:
    return _incremental(c, 32, r.group, "consumer.session.timeout.ms", "50000")


def describe_client_metrics_configs(c: RawClient, r: Res) -> int:
    return _describe_configs(c, 16, f"sub-{r.group}")


def incremental_alter_client_metrics(c: RawClient, r: Res) -> int:
    return _incremental(c, 16, f"sub-{r.group}", "interval.ms", "1000")


def list_config_resources(c: RawClient, r: Res) -> int:
    from kafka.protocol.admin.configs import ListConfigResourcesRequest, ListConfigResourcesResponse
    return c.request(ListConfigResourcesRequest(resource_types=[]), 1, ListConfigResourcesResponse).error_code


def incremental_alter_broker(c: RawClient, r: Res) -> int:
    return _incremental(c, 4, "", "log.cleaner.backoff.ms", "20000")


def alter_topic_configs(c: RawClient, r: Res) -> int:
    R = AlterConfigsRequest.AlterConfigsResource
    resp = c.request(AlterConfigsRequest(resources=[R(resource_type=2, resource_name=r.topic, configs=[
        R.AlterableConfig(name="retention.ms", value="3600000")])], validate_only=True), 2)
    return resp.responses[0].error_code


def describe_cluster_ops(c: RawClient, r: Res) -> int:
    """DescribeCluster needs no ACL; its authorized operations are empty without CLUSTER DESCRIBE."""
    resp = c.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
    assert resp.error_code == 0
    return CLUSTER_DENIED if not resp.authorized_operations else 0


def describe_producers(c: RawClient, r: Res) -> int:
    T = DescribeProducersRequest.TopicRequest
    resp = c.request(DescribeProducersRequest(topics=[T(name=r.topic, partition_indexes=[0])]), 0)
    return resp.topics[0].partitions[0].error_code


def describe_transactions_call(c: RawClient, r: Res) -> int:
    return describe_transactions(c, [r.txn])[0].error_code


def list_transactions_sees(c: RawClient, r: Res) -> int:
    listed = {x.transactional_id for x in list_transactions(c).transaction_states}
    return 0 if r.txn in listed else TXN_DENIED


def update_features(c: RawClient, r: Res) -> int:
    U = UpdateFeaturesRequest.FeatureUpdateKey
    resp = c.request(UpdateFeaturesRequest(timeout_ms=30000, feature_updates=[
        U(feature="group.version", max_version_level=1, upgrade_type=1)], validate_only=True), 1)
    return resp.error_code


def describe_topic_partitions(c: RawClient, r: Res) -> int:
    T = DescribeTopicPartitionsRequest.TopicRequest
    resp = c.request(DescribeTopicPartitionsRequest(topics=[T(name=r.topic)], response_partition_limit=2000,
                                                    cursor=None), 0)
    return resp.topics[0].error_code


def describe_client_quotas(c: RawClient, r: Res) -> int:
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest
    return c.request(DescribeClientQuotasRequest(components=[], strict=False), 1).error_code


def describe_scram_users(c: RawClient, r: Res) -> int:
    from kafka.protocol.admin.users import DescribeUserScramCredentialsRequest
    return c.request(DescribeUserScramCredentialsRequest(users=[]), 0).error_code


def alter_scram_user(c: RawClient, r: Res) -> int:
    from kafka.protocol.admin.users import AlterUserScramCredentialsRequest
    U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    resp = c.request(AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        U(name=f"user-{r.topic}", mechanism=1, iterations=4096, salt=b"salt" * 4, salted_password=b"s" * 32)]), 0)
    return resp.results[0].error_code


def alter_client_quotas(c: RawClient, r: Res) -> int:
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest
    E = AlterClientQuotasRequest.EntryData
    resp = c.request(AlterClientQuotasRequest(entries=[E(
        entity=[E.EntityData(entity_type="user", entity_name=f"user-{r.topic}")],
        ops=[E.OpData(key="producer_byte_rate", value=1024.0, remove=False)])], validate_only=True), 1)
    return resp.entries[0].error_code


def create_acls_call(c: RawClient, r: Res) -> int:
    codes = authz_create_acls(c, [binding(A.TOPIC, r.topic, A.READ, principal="User:nobody")])
    return codes[0]


def describe_acls_call(c: RawClient, r: Res) -> int:
    from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse
    req = DescribeAclsRequest(resource_type_filter=A.R_ANY, resource_name_filter=None, pattern_type_filter=A.P_ANY,
                              principal_filter=None, host_filter=None, operation=A.O_ANY, permission_type=A.PERM_ANY)
    return c.request(req, 2, DescribeAclsResponse).error_code


def delete_acls_call(c: RawClient, r: Res) -> int:
    from kafka.protocol.admin import DeleteAclsRequest, DeleteAclsResponse
    f = DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=A.TOPIC, resource_name_filter=r.topic,
                                           pattern_type_filter=A.LITERAL, principal_filter="User:nobody",
                                           host_filter=None, operation=A.O_ANY, permission_type=A.PERM_ANY)
    return c.request(DeleteAclsRequest(filters=[f]), 2, DeleteAclsResponse).filter_results[0].error_code


# -- share groups (KIP-932) ----------------------------------------------------------------------
def _topic_id(c: RawClient, r: Res):
    return metadata_raw(c, [r.topic], version=12).topics[0].topic_id


def share_group_heartbeat(c: RawClient, r: Res) -> int:
    from minikafka.protocol.messages import ShareGroupHeartbeatRequest
    return c.request(ShareGroupHeartbeatRequest(group_id=r.group, member_id=str(uuid.uuid4()), member_epoch=0,
                                                rack_id=None, subscribed_topic_names=[r.topic]), 1).error_code


def share_group_describe(c: RawClient, r: Res) -> int:
    from minikafka.protocol.messages import ShareGroupDescribeRequest
    return c.request(ShareGroupDescribeRequest(group_ids=[r.group], include_authorized_operations=False),
                     1).groups[0].error_code


def share_fetch(c: RawClient, r: Res) -> int:
    """The top-level error, else the partition's (TOPIC_AUTHORIZATION_FAILED there)."""
    from minikafka.protocol.messages import ShareFetchRequest
    T_ = ShareFetchRequest.FetchTopic
    resp = c.request(ShareFetchRequest(
        group_id=r.group, member_id=str(uuid.uuid4()), share_session_epoch=0, max_wait_ms=0, min_bytes=1,
        max_bytes=1 << 20, max_records=10, batch_size=10, share_acquire_mode=0, is_renew_ack=False,
        topics=[T_(topic_id=r.extra["topic_id"], partitions=[T_.FetchPartition(
            partition_index=0, partition_max_bytes=0, acknowledgement_batches=[])])], forgotten_topics_data=[]), 1)
    if resp.error_code:
        return resp.error_code
    return next((p.error_code for t in resp.responses for p in t.partitions), 0)


def share_acknowledge(c: RawClient, r: Res) -> int:
    from minikafka.protocol.messages import ShareAcknowledgeRequest
    return c.request(ShareAcknowledgeRequest(group_id=r.group, member_id=str(uuid.uuid4()), share_session_epoch=1,
                                             is_renew_ack=False, topics=[]), 1).error_code


def describe_share_group_offsets(c: RawClient, r: Res) -> int:
    from minikafka.protocol.messages import DescribeShareGroupOffsetsRequest as D
    Gr = D.DescribeShareGroupOffsetsRequestGroup
    resp = c.request(D(groups=[Gr(group_id=r.group, topics=[Gr.DescribeShareGroupOffsetsRequestTopic(
        topic_name=r.topic, partitions=[0])])]), 1)
    g = resp.groups[0]
    return g.error_code or g.topics[0].partitions[0].error_code


def alter_share_group_offsets(c: RawClient, r: Res) -> int:
    from minikafka.protocol.messages import AlterShareGroupOffsetsRequest as A_
    T_ = A_.AlterShareGroupOffsetsRequestTopic
    resp = c.request(A_(group_id=r.group, topics=[T_(topic_name=r.topic, partitions=[
        T_.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]), 0)
    return resp.error_code or resp.responses[0].partitions[0].error_code


def delete_share_group_offsets(c: RawClient, r: Res) -> int:
    from minikafka.protocol.messages import DeleteShareGroupOffsetsRequest as D
    resp = c.request(D(group_id=r.group, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=r.topic)]), 0)
    return resp.error_code or resp.responses[0].error_code


# -- set-ups (admin side) ------------------------------------------------------------------------
def topic(a: Admin, r: Res) -> None:
    a.create_topic(r.topic)


def txn_ready(a: Admin, r: Res) -> None:
    """A topic and an initialized transactional producer for r.txn."""
    a.create_topic(r.topic)
    resp = init_producer_id(a.client, r.txn)
    assert resp.error_code == 0, resp
    r.pid, r.epoch = resp.producer_id, resp.producer_epoch


def txn_with_offsets(a: Admin, r: Res) -> None:
    txn_ready(a, r)
    assert add_offsets(a.client, r.txn, r.pid, r.epoch, r.group) == 0


def idempotent_ready(a: Admin, r: Res) -> None:
    a.create_topic(r.topic)
    resp = init_producer_id(a.client, None)
    assert resp.error_code == 0, resp
    r.pid, r.epoch = resp.producer_id, resp.producer_epoch


def share_group_ready(a: Admin, r: Res) -> None:
    """A topic (its id in r.extra) and a share group that has a member and left: empty, with state."""
    a.create_topic(r.topic)
    r.extra["topic_id"] = _topic_id(a.client, r)
    member = str(uuid.uuid4())
    from minikafka.protocol.messages import ShareGroupHeartbeatRequest
    for epoch in (0, -1):  # join, then leave
        resp = a.client.request(ShareGroupHeartbeatRequest(group_id=r.group, member_id=member, member_epoch=epoch,
                                                           rack_id=None, subscribed_topic_names=[r.topic]), 1)
        assert resp.error_code == 0, resp


def share_topic(a: Admin, r: Res) -> None:
    a.create_topic(r.topic)
    r.extra["topic_id"] = _topic_id(a.client, r)


def group_with_offsets(a: Admin, r: Res) -> None:
    a.create_topic(r.topic)
    assert offset_commit(a.client, r) == 0


@dataclass
class Case:
    api: str
    call: Callable[[RawClient, Res], int]
    grants: list[tuple[int, str, int, int]]  # (resource type, "topic"/"group"/"txn"/"cluster", op, error)
    allowed: int | str | frozenset = 0
    setup: Callable[[Admin, Res], None] | None = topic


T, G, X, C = A.TOPIC, A.GROUP, A.TRANSACTIONAL_ID, A.CLUSTER
CASES = [
    Case("Produce", produce, [(T, "topic", A.WRITE, TOPIC_DENIED)]),
    Case("Produce(transactional)", produce_transactional,
         [(X, "txn", A.WRITE, TXN_DENIED), (T, "topic", A.WRITE, TOPIC_DENIED)], NOT_AUTH, txn_ready),
    Case("Produce(idempotent)", produce_idempotent, [(T, "topic", A.WRITE, TOPIC_DENIED)], 0, idempotent_ready),
    Case("Fetch", fetch, [(T, "topic", A.READ, TOPIC_DENIED)]),
    Case("Metadata", metadata, [(T, "topic", A.DESCRIBE, TOPIC_DENIED)]),
    Case("Metadata(auto-create)", metadata_auto_create,
         [(T, "topic", A.DESCRIBE, TOPIC_DENIED), (T, "topic", A.CREATE, TOPIC_DENIED)], 0, None),
    Case("Metadata(auto-create, cluster CREATE)", metadata_auto_create,
         [(T, "topic", A.DESCRIBE, TOPIC_DENIED), (C, "cluster", A.CREATE, TOPIC_DENIED)], 0, None),
    Case("ListOffsets", list_offsets, [(T, "topic", A.DESCRIBE, TOPIC_DENIED)]),
    Case("OffsetForLeaderEpoch", offset_for_leader_epoch, [(T, "topic", A.DESCRIBE, TOPIC_DENIED)]),
    Case("InitProducerId(idempotent, IDEMPOTENT_WRITE)", init_idempotent,
         [(C, "cluster", A.IDEMPOTENT_WRITE, CLUSTER_DENIED)], 0, None),
    Case("InitProducerId(idempotent, WRITE on a topic)", init_idempotent,
         [(T, "topic", A.WRITE, CLUSTER_DENIED)], 0, None),
    Case("InitProducerId(transactional)", init_transactional, [(X, "txn", A.WRITE, TXN_DENIED)], 0, None),
    Case("AddPartitionsToTxn", add_partitions_to_txn,
         [(X, "txn", A.WRITE, TXN_DENIED), (T, "topic", A.WRITE, TOPIC_DENIED)], 0, txn_ready),
    Case("AddOffsetsToTxn", add_offsets_to_txn,
         [(X, "txn", A.WRITE, TXN_DENIED), (G, "group", A.READ, GROUP_DENIED)], 0, txn_ready),
    Case("EndTxn", end_transaction, [(X, "txn", A.WRITE, TXN_DENIED)], NOT_AUTH, txn_ready),
    Case("TxnOffsetCommit", txn_offset_commit_call,
         [(X, "txn", A.WRITE, TXN_DENIED), (G, "group", A.READ, GROUP_DENIED), (T, "topic", A.READ, TOPIC_DENIED)],
         0, txn_with_offsets),
    Case("WriteTxnMarkers", write_markers, [(C, "cluster", A.CLUSTER_ACTION, CLUSTER_DENIED)], NOT_AUTH),
    Case("FindCoordinator(group)", find_group_coordinator, [(G, "group", A.DESCRIBE, GROUP_DENIED)], 0, None),
    Case("FindCoordinator(transaction)", find_txn_coordinator_call, [(X, "txn", A.DESCRIBE, TXN_DENIED)], 0, None),
    Case("JoinGroup", join_group, [(G, "group", A.READ, GROUP_DENIED)], NOT_AUTH, None),
    Case("SyncGroup", sync_group, [(G, "group", A.READ, GROUP_DENIED)], NOT_AUTH, None),
    Case("Heartbeat", heartbeat, [(G, "group", A.READ, GROUP_DENIED)], NOT_AUTH, None),
    Case("LeaveGroup", leave_group, [(G, "group", A.READ, GROUP_DENIED)], NOT_AUTH, None),
    Case("OffsetCommit", offset_commit, [(G, "group", A.READ, GROUP_DENIED), (T, "topic", A.READ, TOPIC_DENIED)]),
    Case("OffsetFetch", offset_fetch,
         [(G, "group", A.DESCRIBE, GROUP_DENIED), (T, "topic", A.DESCRIBE, TOPIC_DENIED)], 0, group_with_offsets),
    Case("DescribeGroups", describe_groups, [(G, "group", A.DESCRIBE, GROUP_DENIED)], 0, group_with_offsets),
    Case("ListGroups", list_groups_sees, [(G, "group", A.DESCRIBE, GROUP_DENIED)], 0, group_with_offsets),
    Case("ListGroups(cluster DESCRIBE)", list_groups_sees, [(C, "cluster", A.DESCRIBE, GROUP_DENIED)], 0,
         group_with_offsets),
    Case("DeleteGroups", delete_groups, [(G, "group", A.DELETE, GROUP_DENIED)], 0, group_with_offsets),
    Case("OffsetDelete", offset_delete,
         [(G, "group", A.DELETE, GROUP_DENIED), (T, "topic", A.READ, TOPIC_DENIED)], 0, group_with_offsets),
    Case("ConsumerGroupHeartbeat", consumer_group_heartbeat,
         [(G, "group", A.READ, GROUP_DENIED), (T, "topic", A.DESCRIBE, TOPIC_DENIED)]),
    Case("ConsumerGroupDescribe", consumer_group_describe, [(G, "group", A.DESCRIBE, GROUP_DENIED)], NOT_AUTH, None),
    Case("ShareGroupHeartbeat", share_group_heartbeat,
         [(G, "group", A.READ, GROUP_DENIED), (T, "topic", A.DESCRIBE, TOPIC_DENIED)]),
    Case("ShareGroupDescribe", share_group_describe, [(G, "group", A.DESCRIBE, GROUP_DENIED)], NOT_AUTH, None),
    Case("ShareFetch", share_fetch, [(G, "group", A.READ, GROUP_DENIED), (T, "topic", A.READ, TOPIC_DENIED)],
         NOT_AUTH, share_topic),  # the group never initialized the share-partition: Kafka answers -1
    Case("ShareAcknowledge", share_acknowledge, [(G, "group", A.READ, GROUP_DENIED)], NOT_AUTH, None),
    Case("DescribeShareGroupOffsets", describe_share_group_offsets,
         [(G, "group", A.DESCRIBE, GROUP_DENIED), (T, "topic", A.DESCRIBE, TOPIC_DENIED)], NOT_AUTH, share_group_ready),
    Case("AlterShareGroupOffsets", alter_share_group_offsets,
         [(G, "group", A.READ, GROUP_DENIED), (T, "topic", A.READ, TOPIC_DENIED)], NOT_AUTH, share_topic),
    Case("DeleteShareGroupOffsets", delete_share_group_offsets,
         [(G, "group", A.DELETE, GROUP_DENIED), (T, "topic", A.READ, TOPIC_DENIED)], NOT_AUTH, share_group_ready),
    Case("CreateTopics", create_topics, [(T, "topic", A.CREATE, TOPIC_DENIED)], 0, None),
    Case("CreateTopics(cluster CREATE)", create_topics, [(C, "cluster", A.CREATE, TOPIC_DENIED)], 0, None),
    Case("DeleteTopics", delete_topics, [(T, "topic", A.DELETE, TOPIC_DENIED)]),
    Case("CreatePartitions", create_partitions, [(T, "topic", A.ALTER, TOPIC_DENIED)]),
    Case("DeleteRecords", delete_records, [(T, "topic", A.DELETE, TOPIC_DENIED)]),
    Case("DescribeConfigs(topic)", describe_topic_configs, [(T, "topic", A.DESCRIBE_CONFIGS, TOPIC_DENIED)]),
    Case("DescribeConfigs(broker)", describe_broker_configs,
         [(C, "cluster", A.DESCRIBE_CONFIGS, CLUSTER_DENIED)], 0, None),
    Case("DescribeConfigs(group)", describe_group_configs, [(G, "group", A.DESCRIBE_CONFIGS, GROUP_DENIED)], 0,
         None),
    Case("IncrementalAlterConfigs(group)", incremental_alter_group, [(G, "group", A.ALTER_CONFIGS, GROUP_DENIED)],
         0, None),
    Case("IncrementalAlterConfigs(topic)", incremental_alter_topic, [(T, "topic", A.ALTER_CONFIGS, TOPIC_DENIED)]),
    Case("IncrementalAlterConfigs(broker)", incremental_alter_broker,
         [(C, "cluster", A.ALTER_CONFIGS, CLUSTER_DENIED)], NOT_AUTH, None),
    Case("AlterConfigs(topic)", alter_topic_configs, [(T, "topic", A.ALTER_CONFIGS, TOPIC_DENIED)]),
    Case("DescribeConfigs(client metrics)", describe_client_metrics_configs,
         [(C, "cluster", A.DESCRIBE_CONFIGS, CLUSTER_DENIED)], 0, None),
    Case("IncrementalAlterConfigs(client metrics)", incremental_alter_client_metrics,
         [(C, "cluster", A.ALTER_CONFIGS, CLUSTER_DENIED)], 0, None),
    Case("ListConfigResources", list_config_resources, [(C, "cluster", A.DESCRIBE_CONFIGS, CLUSTER_DENIED)], 0,
         None),
    Case("DescribeCluster(authorized operations)", describe_cluster_ops,
         [(C, "cluster", A.DESCRIBE, CLUSTER_DENIED)], 0, None),
    Case("DescribeProducers", describe_producers, [(T, "topic", A.READ, TOPIC_DENIED)]),
    Case("DescribeTransactions", describe_transactions_call, [(X, "txn", A.DESCRIBE, TXN_DENIED)], 0, txn_ready),
    Case("ListTransactions", list_transactions_sees, [(X, "txn", A.DESCRIBE, TXN_DENIED)], 0, txn_ready),
    Case("UpdateFeatures", update_features, [(C, "cluster", A.ALTER, CLUSTER_DENIED)], NOT_AUTH, None),
    Case("DescribeTopicPartitions", describe_topic_partitions, [(T, "topic", A.DESCRIBE, TOPIC_DENIED)]),
    Case("DescribeClientQuotas", describe_client_quotas, [(C, "cluster", A.DESCRIBE_CONFIGS, CLUSTER_DENIED)], 0,
         None),
    Case("DescribeUserScramCredentials", describe_scram_users, [(C, "cluster", A.DESCRIBE, CLUSTER_DENIED)], 0, None),
    Case("AlterUserScramCredentials", alter_scram_user, [(C, "cluster", A.ALTER, CLUSTER_DENIED)], 0, None),
    Case("AlterClientQuotas", alter_client_quotas, [(C, "cluster", A.ALTER_CONFIGS, CLUSTER_DENIED)], 0, None),
    Case("CreateAcls", create_acls_call, [(C, "cluster", A.ALTER, CLUSTER_DENIED)], 0, None),
    Case("DescribeAcls", describe_acls_call, [(C, "cluster", A.DESCRIBE, CLUSTER_DENIED)], 0, None),
    Case("DeleteAcls", delete_acls_call, [(C, "cluster", A.ALTER, CLUSTER_DENIED)], 0, None),
]


def _check(case: Case, got: int) -> None:
    if case.allowed == NOT_AUTH:
        assert got not in AUTH_ERRORS, (case.api, got)
    elif isinstance(case.allowed, frozenset):
        assert got in case.allowed, (case.api, got)
    else:
        assert got == case.allowed, (case.api, got)


@pytest.mark.parametrize("case", CASES, ids=[c.api for c in CASES])
def test_matrix(secured, admin, case):
    r = fresh()
    if case.setup is not None:
        case.setup(admin, r)
    acls = [binding(rtype, r.name(key), op) for rtype, key, op, _code in case.grants]
    try:
        with RawClient(secured) as c:
            for i, (_rtype, _key, _op, code) in enumerate(case.grants):
                others = acls[:i] + acls[i + 1:]
                admin.grant(*others) if others else None
                assert case.call(c, r) == code, (case.api, "without", acls[i])
                admin.revoke(*others)
            admin.grant(*acls)
            for acl_, (_rtype, _key, _op, code) in zip(acls, case.grants):  # each one overridden by a DENY
                deny = acl_._replace(permission=A.DENY)
                admin.grant(deny)
                try:
                    assert case.call(c, r) == code, (case.api, "denied", deny)
                finally:
                    admin.revoke(deny)
            _check(case, case.call(c, r))  # last: an allowed call may change what the others would see
    finally:
        admin.revoke(*[b for b in acls if b in describe_acls(admin.client)])
