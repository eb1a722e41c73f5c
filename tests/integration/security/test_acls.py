"""ACL semantics end to end (also on the oracle, `--broker=kafka`): allow.everyone.if.no.acl.found,
literal/prefixed/wildcard patterns, DENY over ALLOW, hosts, authorized-operations fields, the
foreign-abort scenario (WriteTxnMarkers from a normal principal refused, the victim's transaction
commits) and Kafka's own kafka-acls tool. Persistence, super users and the default deny need
minikafka restarts (broker_factory)."""
from __future__ import annotations

import sys
import uuid

import pytest
from kafka.protocol.admin import DescribeClusterRequest

from minikafka.broker.security import acl as A
from tests.support.authz_helpers import (CLUSTER_DENIED, STANDARD_AUTHORIZER, TOPIC_DENIED, Admin, binding,
                                 bootstrap_admin, create_acls, describe_acls, secured_broker)
from tests.conftest import ROOT
from tests.support.helpers import RawClient, build_batch, fetch_once, metadata_raw, produce_raw
from tests.support.txn_helpers import fetch_isolated, write_txn_markers

@pytest.fixture(scope="module")
def secured(request, tmp_path_factory):
    yield from secured_broker(request, tmp_path_factory)


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_allow_everyone_if_no_acl_found(secured):
    """Runs first: no ACL exists yet, so with allow.everyone.if.no.acl.found=true anyone may do
    anything; one ACL on a resource (for someone else) takes that away for that resource only."""
    admin = Admin(secured)  # no grants yet: allowed by the same rule
    t1, t2 = name("everyone"), name("everyone")
    admin.create_topic(t1)
    admin.create_topic(t2)
    with RawClient(secured) as c:
        assert produce_raw(c, t1, build_batch([b"a"])).error_code == 0
        assert create_acls(c, [binding(A.TOPIC, t1, A.WRITE, principal="User:bob", host="*")]) == [0]
        admin._wait(lambda acls: any(a.name == t1 for a in acls))
        assert produce_raw(c, t1, build_batch([b"b"])).error_code == TOPIC_DENIED
        assert produce_raw(c, t2, build_batch([b"c"])).error_code == 0
    admin.revoke(binding(A.TOPIC, t1, A.WRITE, principal="User:bob", host="*"))
    admin.close()


@pytest.fixture(scope="module")
def admin(secured):
    a = bootstrap_admin(secured)
    yield a
    a.close()


def test_literal_prefixed_wildcard_deny_and_host(secured, admin):
    tag = uuid.uuid4().hex[:6]
    prefix = f"pfx-{tag}-"
    inside, other, denied = prefix + "a", f"other-{tag}", prefix + "denied"
    for t in (inside, other, denied):
        admin.create_topic(t)
    grants = [binding(A.TOPIC, prefix, A.READ, pattern=A.PREFIXED),
              binding(A.TOPIC, denied, A.READ, A.DENY)]
    admin.grant(*grants)
    try:
        with RawClient(secured) as c:
            assert fetch_once(c, inside, 0, 0).error_code == 0
            assert fetch_once(c, other, 0, 0).error_code == TOPIC_DENIED
            assert fetch_once(c, denied, 0, 0).error_code == TOPIC_DENIED  # DENY wins over the prefixed ALLOW
            # READ implies DESCRIBE (metadata), not WRITE
            assert metadata_raw(c, [inside]).topics[0].error_code == 0
            assert produce_raw(c, inside, build_batch([b"x"])).error_code == TOPIC_DENIED
            # an ACL for another host does not apply; User:* applies to everyone
            other_host = binding(A.TOPIC, other, A.READ, host="10.1.2.3")
            admin.grant(other_host)
            assert fetch_once(c, other, 0, 0).error_code == TOPIC_DENIED
            everyone = binding(A.TOPIC, other, A.READ, principal="User:*")
            admin.grant(everyone)
            assert fetch_once(c, other, 0, 0).error_code == 0
            grants += [other_host, everyone]
    finally:
        admin.revoke(*grants)


def test_metadata_hides_topics_and_reports_authorized_operations(secured, admin):
    visible, hidden = name("vis"), name("hid")
    admin.create_topic(visible)
    admin.create_topic(hidden)
    grants = [binding(A.TOPIC, visible, A.READ), binding(A.CLUSTER, A.CLUSTER_NAME, A.ALTER)]
    admin.grant(*grants)
    try:
        with RawClient(secured) as c:
            from kafka.protocol.metadata import MetadataRequest
            req = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=True)
            names = {t.name: t for t in c.request(req, 9).topics}
            assert visible in names and hidden not in names
            assert set(names[visible].authorized_operations) == {A.READ, A.DESCRIBE}
            named = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=hidden),
                                                      MetadataRequest.MetadataRequestTopic(name=name("nope"))],
                                              allow_auto_topic_creation=False,
                                              include_cluster_authorized_operations=False,
                                              include_topic_authorized_operations=False), 9).topics
            # existing or not, a topic one may not DESCRIBE is answered alike
            assert [t.error_code for t in named] == [TOPIC_DENIED, TOPIC_DENIED]
            resp = c.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
            assert set(resp.authorized_operations) == {A.ALTER, A.DESCRIBE}
    finally:
        admin.revoke(*grants)


def test_foreign_abort_refused_and_victim_commits(secured, admin):
    """WriteTxnMarkers(ABORT) for another producer's open transaction from a normal principal is refused
    with CLUSTER_AUTHORIZATION_FAILED, and the victim's commit reaches read_committed consumers."""
    from confluent_kafka import Producer
    from kafka.protocol.admin import DescribeProducersRequest

    topic, txn = name("victim"), name("victim-txn")
    admin.create_topic(topic, records=0)
    grants = [binding(A.TRANSACTIONAL_ID, txn, A.WRITE), binding(A.TOPIC, topic, A.WRITE)]
    admin.grant(*grants)
    try:
        p = Producer({"bootstrap.servers": secured, "transactional.id": txn, "linger.ms": 0})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, value=f"v{i}".encode())
        p.flush(30)
        # the attacker learns the victim's producer id and epoch (here from the admin's DescribeProducers)
        T = DescribeProducersRequest.TopicRequest
        (state,) = admin.client.request(DescribeProducersRequest(topics=[T(name=topic, partition_indexes=[0])]), 0) \
            .topics[0].partitions[0].active_producers
        with RawClient(secured) as attacker:
            codes = write_txn_markers(attacker, state.producer_id, state.producer_epoch, False, 0, {topic: [0]})
        assert codes == {(topic, 0): CLUSTER_DENIED}
        p.commit_transaction(30)
        from tests.support.helpers import decode_records, wait_until

        def committed() -> list:
            part = fetch_isolated(admin.client, topic, 0, 0, isolation=1)  # read_committed
            assert part.error_code == 0 and not part.aborted_transactions, part
            return [v for _o, _k, v in decode_records(bytes(part.records or b"")) if v is not None]
        # Kafka writes the commit markers after EndTxn returns: wait for the LSO to move
        wait_until(lambda: committed() == [f"v{i}".encode() for i in range(5)], timeout=15,
                   what="the victim's committed records")
    finally:
        admin.revoke(*grants)


def test_confluent_clients_see_authorization_errors(secured, admin):
    """Stock clients without ACLs get Kafka's errors; with them they work."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    topic = name("client")
    admin.create_topic(topic, records=0)
    errors = []
    p = Producer({"bootstrap.servers": secured, "enable.idempotence": False, "message.timeout.ms": 10000,
                  "linger.ms": 0})
    p.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant = binding(A.TOPIC, topic, A.WRITE)
    admin.grant(grant)
    try:
        errors.clear()
        p = Producer({"bootstrap.servers": secured, "enable.idempotence": False, "linger.ms": 0})
        p.produce(topic, b"y", on_delivery=lambda err, msg: errors.append(err))
        p.flush(15)
        assert errors == [None]
        client = AdminClient({"bootstrap.servers": secured})
        with pytest.raises(KafkaException) as exc:
            client.delete_topics([topic])[topic].result(30)
        assert exc.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        admin.revoke(grant)


def test_kafka_acls_tool(secured, admin):
    """Kafka's kafka-acls --add / --list / --remove against the broker (the tool needs CLUSTER ALTER)."""
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab

    grant = binding(A.CLUSTER, A.CLUSTER_NAME, A.ALTER)
    admin.grant(grant)
    topic = name("tool")
    try:
        def tool(*args: str) -> str:
            res = lab.run_tool("kafka-acls", ["--bootstrap-server", secured, *args], timeout=120)
            assert res.returncode == 0, res.stdout + res.stderr
            return res.stdout

        tool("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
             "--topic", topic, "--resource-pattern-type", "prefixed")
        tool("--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation", "All",
             "--group", "g-" + topic)
        listed = tool("--list", "--topic", topic, "--resource-pattern-type", "match")
        assert "principal=User:alice" in listed and "operation=READ" in listed and "patternType=PREFIXED" in listed
        acls = describe_acls(admin.client)
        assert A.AclBinding(A.TOPIC, topic, A.PREFIXED, "User:alice", "*", A.READ, A.ALLOW) in acls
        assert A.AclBinding(A.GROUP, "g-" + topic, A.LITERAL, "User:mallory", "10.0.0.9", A.ALL, A.DENY) in acls
        tool("--remove", "--force", "--topic", topic, "--resource-pattern-type", "prefixed")
        tool("--remove", "--force", "--group", "g-" + topic)
        assert not {a for a in describe_acls(admin.client) if topic in a.name}
    finally:
        admin.revoke(grant)


# -- minikafka restarts --------------------------------------------------------------------------
def _config(**extra: str) -> dict[str, str]:
    return {"authorizer.class.name": STANDARD_AUTHORIZER, **extra}


def test_acls_survive_restart_and_kill(broker_factory):
    b = broker_factory(_config(**{"allow.everyone.if.no.acl.found": "true"}))
    admin = bootstrap_admin(b.bootstrap)
    topic = name("durable")
    admin.create_topic(topic)
    grants = [binding(A.TOPIC, topic, A.READ), binding(A.TOPIC, "dur", A.WRITE, A.DENY, pattern=A.PREFIXED)]
    admin.grant(*grants)
    before = describe_acls(admin.client)
    admin.close()
    for stop in ("kill", "stop"):
        getattr(b, stop)()
        b.start()
        with RawClient(b.bootstrap) as c:
            assert fetch_once(c, topic, 0, 0).error_code == 0
            assert produce_raw(c, topic, build_batch([b"x"])).error_code == TOPIC_DENIED
        a2 = Admin(b.bootstrap)
        assert describe_acls(a2.client) == before, stop
        a2.close()


def test_default_denies_everything_but_super_users(broker_factory):
    """allow.everyone.if.no.acl.found defaults to false: without ACLs nobody may do anything, not even
    create ACLs; a super user may do everything, DENY ACLs notwithstanding."""
    b = broker_factory(_config())
    topic = name("closed")
    with RawClient(b.bootstrap) as c:
        assert metadata_raw(c, [topic], auto_create=True).topics[0].error_code == TOPIC_DENIED
        assert create_acls(c, [binding(A.TOPIC, topic, A.READ)]) == [CLUSTER_DENIED]
    b.stop()
    b.config["super.users"] = "User:admin;User:ANONYMOUS"
    b.start()
    with RawClient(b.bootstrap) as c:
        assert create_acls(c, [binding(A.TOPIC, topic, A.ALL, A.DENY, host="*")]) == [0]
        t = metadata_raw(c, [topic], auto_create=True).topics[0]
        assert t.error_code == 0
        assert produce_raw(c, topic, build_batch([b"x"])).error_code == 0


@pytest.mark.minikafka_only
def test_unknown_authorizer_refused_at_startup(tmp_path):
    from minikafka.broker.config.core import BrokerConfig, ConfigError

    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                      "log.dirs": str(tmp_path)})
    with pytest.raises(ConfigError, match="allow.everyone.if.no.acl.found"):
        BrokerConfig({"allow.everyone.if.no.acl.found": "yes", "log.dirs": str(tmp_path)})


def test_offset_fetch_all_topics_shows_only_describable_ones(secured, admin):
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

    group, seen, unseen = name("ofg"), name("seen"), name("unseen")
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    for t in (seen, unseen):
        admin.create_topic(t)
    commit = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                 group_instance_id=None, topics=[
                                     T(name=t, partitions=[P(partition_index=0, committed_offset=1,
                                                             committed_leader_epoch=-1, committed_metadata="")])
                                     for t in (seen, unseen)])
    from kafka.protocol.metadata import FindCoordinatorRequest

    from tests.support.helpers import wait_until
    # Kafka creates __consumer_offsets on FindCoordinator; NOT_COORDINATOR / LOAD_IN_PROGRESS until it is ready
    admin.client.request(FindCoordinatorRequest(key=group, key_type=0), 3)
    wait_until(lambda: all(p.error_code == 0 for t in admin.client.request(commit, 8).topics for p in t.partitions),
               timeout=30, interval=0.2, what="the offset commit")
    grants = [binding(A.GROUP, group, A.DESCRIBE), binding(A.TOPIC, seen, A.DESCRIBE)]
    admin.grant(*grants)
    try:
        with RawClient(secured) as c:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            resp = c.request(OffsetFetchRequest(groups=[G(group_id=group, topics=None)], require_stable=False), 8)
            (g,) = resp.groups
            assert g.error_code == 0
            assert [(t.name, [p.committed_offset for p in t.partitions]) for t in g.topics] == [(seen, [1])]
    finally:
        admin.revoke(*grants)


def test_create_topics_shows_configs_only_with_describe_configs(secured, admin):
    from kafka.protocol.admin import CreateTopicsRequest

    hidden, shown = name("cfg-hidden"), name("cfg-shown")
    grants = [binding(A.TOPIC, hidden, A.CREATE), binding(A.TOPIC, shown, A.CREATE),
              binding(A.TOPIC, shown, A.DESCRIBE_CONFIGS)]
    admin.grant(*grants)
    try:
        T = CreateTopicsRequest.CreatableTopic
        with RawClient(secured) as c:
            resp = c.request(CreateTopicsRequest(topics=[T(name=t, num_partitions=2, replication_factor=1,
                                                           assignments=[], configs=[]) for t in (hidden, shown)],
                                                 timeout_ms=30000, validate_only=False), 7)
        by_name = {t.name: t for t in resp.topics}
        h, s = by_name[hidden], by_name[shown]
        assert (h.error_code, h.topic_config_error_code, h.num_partitions, h.replication_factor, list(h.configs)) \
            == (0, TOPIC_DENIED, -1, -1, [])
        assert (s.error_code, s.topic_config_error_code, s.num_partitions, s.replication_factor) == (0, 0, 2, 1)
        assert any(c.name == "retention.ms" for c in s.configs)
    finally:
        admin.revoke(*grants)


def test_group_and_topic_authorized_operations(secured, admin):
    from kafka.protocol.admin import DescribeGroupsRequest, DescribeTopicPartitionsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    group, topic, hidden = name("ops-g"), name("ops-t"), name("ops-h")
    admin.create_topic(topic)
    admin.create_topic(hidden)
    admin.client.request(FindCoordinatorRequest(key=group, key_type=0), 3)
    grants = [binding(A.GROUP, group, A.READ), binding(A.TOPIC, topic, A.WRITE),
              binding(A.TOPIC, topic, A.ALTER_CONFIGS)]
    admin.grant(*grants)
    try:
        with RawClient(secured) as c:
            from tests.support.helpers import wait_until

            def described():
                resp = c.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=True), 5)
                return resp.groups[0] if resp.groups[0].error_code not in (14, 15, 16) else None
            g = wait_until(described, timeout=30, interval=0.2, what="DescribeGroups")
            assert g.error_code == 0 and set(g.authorized_operations) == {A.READ, A.DESCRIBE}
            T = DescribeTopicPartitionsRequest.TopicRequest
            resp = c.request(DescribeTopicPartitionsRequest(topics=[T(name=topic), T(name=hidden)],
                                                            response_partition_limit=2000, cursor=None), 0)
            by_name = {t.name: t for t in resp.topics}
            assert by_name[hidden].error_code == TOPIC_DENIED
            ops = by_name[topic].topic_authorized_operations
            assert by_name[topic].error_code == 0
            assert {op for op in range(32) if ops >> op & 1} == {A.WRITE, A.DESCRIBE, A.ALTER_CONFIGS,
                                                                  A.DESCRIBE_CONFIGS}
    finally:
        admin.revoke(*grants)


def test_regex_subscription_assigns_only_describable_topics(secured, admin):
    """Kafka 4.3 resolves a consumer group's topic regex to the topics the member may DESCRIBE."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    from tests.support.consumer_protocol_helpers import heartbeat as cg_heartbeat
    from tests.support.helpers import wait_until

    tag = uuid.uuid4().hex[:6]
    seen, unseen, group = f"rx{tag}-a", f"rx{tag}-b", f"rx-g-{tag}"
    admin.create_topic(seen)
    admin.create_topic(unseen)
    ids = {t.name: t.topic_id for t in metadata_raw(admin.client, [seen, unseen], version=12).topics}
    admin.client.request(FindCoordinatorRequest(key=group, key_type=0), 3)
    grants = [binding(A.GROUP, group, A.READ), binding(A.TOPIC, seen, A.DESCRIBE)]
    admin.grant(*grants)
    member, state = str(uuid.uuid4()), {"epoch": 0, "assigned": set()}
    try:
        with RawClient(secured) as c:
            def assigned() -> bool:
                epoch = state["epoch"]
                r = cg_heartbeat(c, group, member, epoch, regex=f"rx{tag}-.*" if epoch == 0 else None,
                                 owned=None if epoch == 0 else [])
                assert r.error_code in (0, 14, 15, 16), r
                if r.error_code == 0:
                    state["epoch"] = r.member_epoch
                    if r.assignment is not None:
                        state["assigned"] = {tp.topic_id for tp in r.assignment.topic_partitions}
                return bool(state["assigned"])
            wait_until(assigned, timeout=45, interval=0.5, what="an assignment")
            assert state["assigned"] == {ids[seen]}
    finally:
        admin.revoke(*grants)


def test_exactly_once_pipeline_with_exactly_the_needed_acls(secured, admin):
    """consume-transform-produce with stock clients and only the ACLs Kafka's docs list for it:
    READ on the input topic and the group, WRITE on the output topic and the transactional id (an
    idempotent producer needs nothing more than WRITE on its topic, KIP-679)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.support.helpers import wait_until

    src, dst, group, txn = name("eos-in"), name("eos-out"), name("eos-g"), name("eos-tx")
    admin.create_topic(src, records=0)
    admin.create_topic(dst, records=0)
    grants = [binding(A.TOPIC, src, A.READ), binding(A.TOPIC, src, A.WRITE), binding(A.GROUP, group, A.READ),
              binding(A.TOPIC, dst, A.WRITE), binding(A.TOPIC, dst, A.READ), binding(A.TRANSACTIONAL_ID, txn, A.WRITE)]
    admin.grant(*grants)
    try:
        idem = Producer({"bootstrap.servers": secured, "enable.idempotence": True, "linger.ms": 0})
        for i in range(10):
            idem.produce(src, value=f"m{i}".encode())
        assert idem.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": secured, "group.id": group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        consumer.subscribe([src])
        producer = Producer({"bootstrap.servers": secured, "transactional.id": txn, "linger.ms": 0})
        producer.init_transactions(30)
        got: list = []
        wait_until(lambda: got.extend(m for m in consumer.consume(10, 1.0) if not m.error()) or len(got) >= 10,
                   timeout=60, what="the input records")
        producer.begin_transaction()
        for m in got:
            producer.produce(dst, value=m.value().upper())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        consumer.close()
        committed = Consumer({"bootstrap.servers": secured, "group.id": group})
        (tp,) = committed.committed([TopicPartition(src, 0)], timeout=30)
        assert tp.offset == 10
        committed.close()
        reader = Consumer({"bootstrap.servers": secured, "group.id": group, "enable.auto.commit": False,
                           "isolation.level": "read_committed"})
        reader.assign([TopicPartition(dst, 0, 0)])
        out: list = []
        wait_until(lambda: out.extend(m.value() for m in reader.consume(10, 1.0) if not m.error()) or len(out) >= 10,
                   timeout=60, what="the output records")
        reader.close()
        assert out == [f"M{i}".encode() for i in range(10)]
    finally:
        admin.revoke(*grants)


def test_acks_zero_produce_to_a_denied_topic_closes_the_connection(secured, admin):
    """No response is due for acks=0, so Kafka closes the connection when the produce failed."""
    from tests.support.helpers import produce_request

    topic = name("acks0")
    admin.create_topic(topic, records=0)
    with RawClient(secured) as c:
        c.send(produce_request(topic, build_batch([b"x"]), acks=0), 9)
        assert c.closed_by_peer(10)
    grant = binding(A.TOPIC, topic, A.WRITE)
    admin.grant(grant)
    try:
        with RawClient(secured) as c:
            c.send(produce_request(topic, build_batch([b"y"]), acks=0), 9)
            assert not c.closed_by_peer(1)
            assert metadata_raw(c, [topic]).topics[0].error_code == 0  # the connection still works
    finally:
        admin.revoke(grant)
