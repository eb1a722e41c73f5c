"""Coordinators fail over on a three-node cluster (issue 16): the group and transaction coordinators
are the leaders of the key's `__consumer_offsets` / `__transaction_state` partition (RF 3), so
kill -9 of the coordinator's node moves them to a surviving replica, which loads the partition and
finishes what the dead one left.

- Transactions (confluent-kafka): the coordinator's node is killed right after a commit returned
  (the new coordinator completes the PREPARE_COMMIT: the records become visible), and with a
  transaction open (the commit then goes to the new coordinator, or the transaction aborts). Every
  transaction ends committed or aborted as a whole; read_committed never sees an aborted record.
- Groups: a consumer group whose coordinator's node is killed keeps its committed offsets and
  rebalances when a second member joins (the new members continue after the committed offsets).
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from tests.support.cluster_harness import Cluster
from tests.support.helpers import RawClient, metadata_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

CONFIG = {"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "2000",
          "broker.heartbeat.interval.ms": "400", "group.initial.rebalance.delay.ms": "0",
          "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3",
          "offsets.commit.timeout.ms": "3000"}
TOPIC = "events"
GROUP_TOPIC = "group-events"
GROUP, TRANSACTION = 0, 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for the module: each test leaves all three nodes running with full ISRs."""
    c = Cluster(tmp_path_factory.mktemp("coordinator-failover"), config=CONFIG).start()
    try:
        create_topic(c, TOPIC)
        yield c
    finally:
        c.stop()


def create_topic(cluster: Cluster, name: str) -> None:
    """`name` with 3 partitions, replication factor 3, min.insync.replicas 2."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def created() -> bool:  # RF 3 needs all three brokers registered
        try:
            admin.create_topics([NewTopic(name, 3, 3, config={"min.insync.replicas": "2"})])[name].result(3)
        except KafkaException as exc:
            return exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
        except Exception:  # no answer in time (no controller yet)
            return False
        return True
    wait_until(created, timeout=30, interval=0.5, what=f"{name} with replication factor 3")


def restart_and_wait_in_sync(cluster: Cluster, dead: set[int]) -> None:
    """Start the dead nodes again and wait until every node's own Metadata lists all three brokers and
    all three replicas in every ISR (a restarted node is then caught up: until then it may answer
    Metadata without any broker, after which librdkafka forgets every broker)."""
    for n in sorted(dead):
        cluster.restart(n)
    dead.clear()

    def view(node) -> bool:
        try:
            with RawClient(node.bootstrap, timeout=3.0) as c:
                md = metadata_raw(c)
        except OSError:
            return False
        parts = [p for t in md.topics for p in t.partitions]
        return len(md.brokers) == 3 and TOPIC in {t.name for t in md.topics} and \
            all(len(p.isr_nodes) == 3 and p.leader_id >= 0 for p in parts)
    wait_until(lambda: all(view(node) for node in cluster.nodes.values()), timeout=40, interval=0.3,
               what="every node caught up and every replica back in sync")


def live_bootstrap(cluster: Cluster, dead: set[int]) -> str:
    return ",".join(node.bootstrap for n, node in cluster.nodes.items() if n not in dead)


def coordinator(cluster: Cluster, key_type: int, key: str, dead: set[int] = frozenset()) -> int:
    """The node FindCoordinator names for `key` (asked of a live node, retried until one is named)."""
    found: list[int] = []

    def ask() -> bool:
        for n, node in cluster.nodes.items():
            if n in dead:
                continue
            try:
                with RawClient(node.bootstrap, timeout=3.0) as c:
                    resp = c.request(FindCoordinatorRequest(key=key, key_type=key_type), 3, FindCoordinatorResponse)
            except OSError:
                continue
            if resp.error_code == 0 and resp.node_id not in dead:
                host, port = cluster.nodes[resp.node_id].bootstrap.split(":")  # the leader's broker listener
                assert (resp.error_message, resp.host, resp.port) == ("NONE", host, int(port))
                found[:] = [resp.node_id]
                return True
        return False
    wait_until(ask, timeout=30, interval=0.2, what=f"a coordinator for {key}")
    return found[0]


def read_committed(bootstrap: str, expected: int, timeout: float = 40.0) -> list[bytes]:
    """Every record of TOPIC a read_committed consumer sees, once at least `expected` arrived and the
    end (the LSO of every partition) was reached."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while not (len(values) >= expected and len(at_end) == 3):
            assert time.monotonic() < deadline, f"read {len(values)} of {expected} committed records"
            for msg in consumer.consume(100, 0.5):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_transactions_survive_the_coordinators_kill(cluster):
    dead: set[int] = set()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "tx-failover",
                         "transaction.timeout.ms": "30000", "message.timeout.ms": "30000"})
    producer.init_transactions(30)
    # consume-transform-produce: each transaction also commits an offset of group "eos" (TxnOffsetCommit
    # through that group's coordinator, settled by the markers in its __consumer_offsets partition)
    group = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "eos"})
    outcome: dict[str, bool] = {}

    def transaction(name: str, kill_before_commit: bool = False, kill_after_commit: bool = False) -> None:
        producer.begin_transaction()
        for i in range(6):
            producer.produce(TOPIC, value=f"{name}-{i}".encode(), partition=i % 3)
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 100 + ord(name))],
                                             group.consumer_group_metadata(), 30)
        producer.flush(30)
        node = coordinator(cluster, TRANSACTION, "tx-failover", dead)
        if kill_before_commit:
            cluster.kill(node)
            dead.add(node)
        try:
            producer.commit_transaction(60)
            outcome[name] = True
        except KafkaException as exc:
            assert exc.args[0].txn_requires_abort() or exc.args[0].retriable(), exc
            producer.abort_transaction(60)
            outcome[name] = False
        if kill_after_commit:  # the markers may still be on their way: the next coordinator sends them
            cluster.kill(node)
            dead.add(node)

    transaction("a")
    transaction("b", kill_after_commit=True)
    assert outcome["b"]
    restart_and_wait_in_sync(cluster, dead)
    transaction("c", kill_before_commit=True)
    transaction("d")  # the producer goes on with the new coordinator
    assert outcome["a"] and outcome["d"]
    committed = [n for n, ok in outcome.items() if ok]
    values = read_committed(live_bootstrap(cluster, dead), 6 * len(committed))
    seen = {}
    for v in values:
        name = v.decode().split("-")[0]
        seen[name] = seen.get(name, 0) + 1
    # all or nothing per transaction, and only committed ones
    assert seen == {n: 6 for n in committed}, (seen, outcome)
    assert len(values) == len(set(values))
    # the group's offset is the last committed transaction's, never an aborted one's
    offsets = Consumer({"bootstrap.servers": live_bootstrap(cluster, dead), "group.id": "eos"})
    (tp,) = offsets.committed([TopicPartition(TOPIC, 0)], 20)
    assert tp.offset == 100 + ord(max(committed)), (tp, outcome)
    offsets.close()
    group.close()
    restart_and_wait_in_sync(cluster, dead)


def test_group_keeps_offsets_and_rebalances_after_its_coordinators_kill(cluster):
    create_topic(cluster, GROUP_TOPIC)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(GROUP_TOPIC, value=f"first-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0

    def member(name: str) -> Consumer:
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g-failover", "client.id": name,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": "10000",
                      "heartbeat.interval.ms": "500", "fetch.wait.max.ms": 100})
        c.subscribe([GROUP_TOPIC])
        return c

    first = member("first")
    got: list[bytes] = []
    wait_until(lambda: got.extend(m.value() for m in first.consume(100, 0.5) if not m.error()) or len(got) >= 30,
               timeout=40, what="the first 30 records")
    first.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in first.committed([TopicPartition(GROUP_TOPIC, p) for p in range(3)], 10)}
    assert sum(committed.values()) == 30

    node = coordinator(cluster, GROUP, "g-failover")
    cluster.kill(node)
    dead = {node}
    new_node = coordinator(cluster, GROUP, "g-failover", dead)
    assert new_node != node

    def offsets_kept() -> bool:
        try:
            now = first.committed([TopicPartition(GROUP_TOPIC, p) for p in range(3)], 5)
        except KafkaException:
            return False
        return {tp.partition: tp.offset for tp in now} == committed
    wait_until(offsets_kept, timeout=30, interval=0.5, what="the committed offsets from the new coordinator")

    second = member("second")
    for i in range(30):
        producer.produce(GROUP_TOPIC, value=f"second-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    later: list[bytes] = []

    def rebalanced_and_read() -> bool:
        for c in (first, second):
            later.extend(m.value() for m in c.consume(100, 0.2) if not m.error())
        return len(later) >= 30 and first.assignment() and second.assignment()
    wait_until(rebalanced_and_read, timeout=40, interval=0, what="both members assigned and the next 30 records")
    # the partitions are split between the members, and nobody went back before the committed offsets
    assert {tp.partition for tp in first.assignment()} | {tp.partition for tp in second.assignment()} == {0, 1, 2}
    assert not {tp.partition for tp in first.assignment()} & {tp.partition for tp in second.assignment()}
    # at-least-once across the rebalance (a member may re-read what another read but had not committed),
    # never before the committed offsets: every new record, none of the committed ones
    assert set(later) == {f"second-{i}".encode() for i in range(30)}
    first.close()
    second.close()
    restart_and_wait_in_sync(cluster, dead)


def test_a_commit_is_not_visible_before_it_is_replicated(cluster):
    """A reader never sees a committed offset that a coordinator failover could still lose: with both
    followers of the group's `__consumer_offsets` partition paused, a commit waits for replication, and
    an OffsetFetch meanwhile answers the earlier offset or an error, never the unreplicated one (Kafka's
    coordinators read at the last committed offset). Once the followers are back it is visible."""
    from threading import Thread

    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

    group = "g-unreplicated"
    node = coordinator(cluster, GROUP, group)
    T = OffsetCommitRequest.OffsetCommitRequestTopic

    def commit(client: RawClient, offset: int):
        return client.request(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[T(name=TOPIC, partitions=[T.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])]),
            8).topics[0].partitions[0].error_code

    def fetch(client: RawClient) -> tuple[int, int]:
        resp = client.request(OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=TOPIC, partition_indexes=[0])], require_stable=False), 7)
        if resp.error_code:
            return resp.error_code, -1
        return resp.topics[0].partitions[0].error_code, resp.topics[0].partitions[0].committed_offset

    bootstrap = cluster.nodes[node].bootstrap
    with RawClient(bootstrap, timeout=20.0) as writer, RawClient(bootstrap, timeout=20.0) as reader:
        assert commit(writer, 5) == 0
        assert fetch(reader) == (0, 5)
        others = [n for n in cluster.nodes if n != node]
        for n in others:
            cluster.pause(n)
        try:
            answers: list[int] = []
            pending = Thread(target=lambda: answers.append(commit(writer, 9)))
            pending.start()
            # until the commit is appended the reader sees 5; from then on it must not see 9
            deadline = time.monotonic() + 10
            while (seen := fetch(reader)) == (0, 5):
                assert time.monotonic() < deadline, "the commit was never appended"
            assert seen[0] != 0 and seen[1] != 9, seen
            pending.join(30)
            assert answers and answers[0] != 0, "a commit answered before its followers had it"
        finally:
            for n in others:
                cluster.resume(n)
        # the followers are back: the commit's record reaches them and, committed, becomes visible
        wait_until(lambda: fetch(reader) == (0, 9), timeout=30, interval=0.3, what="the commit once replicated")
