"""Partition replication between three `minikafka serve` processes (issue 16): acks=all on RF 3
survives kill -9 of the partition leader (the new leader comes from the ISR, the idempotent producer
goes on with its sequences, nothing acknowledged is lost or duplicated); min.insync.replicas refuses
acks=all with NOT_ENOUGH_REPLICAS while a replica is down and a restarted replica rejoins the ISR; a
former leader that appended records nobody else has truncates them (diverging epoch) when it comes
back as a follower; with two of three nodes down nothing is acknowledged with acks=all."""
from __future__ import annotations

import threading
import time

import pytest

from tests.support.cluster_harness import Cluster, registered
from tests.support.helpers import RawClient, build_batch, fetch_all, fetch_once, metadata_raw, produce_raw, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
CONFIG = {"replica.lag.time.max.ms": "1500", "broker.session.timeout.ms": "2000",
          "broker.heartbeat.interval.ms": "200", "replica.fetch.wait.max.ms": "200",
          "replica.fetch.backoff.ms": "100"}


@pytest.fixture(scope="module")
def shared():
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as root:
        c = Cluster(Path(root), config=CONFIG).start()
        try:
            yield c
        finally:
            c.stop()


@pytest.fixture
def cluster(shared):
    """One three-node cluster for the module (start-up is most of the cost); each test gets it with
    every node up and registered, and restarts what it killed."""
    for n, node in shared.nodes.items():
        if not node.alive():
            shared.restart(n)
    wait_until(lambda: registered(shared), timeout=30, what="every broker registered and unfenced")
    return shared


def live_bootstrap(cluster: Cluster, down: set[int] = frozenset()) -> str:
    return ",".join(cluster.nodes[n].bootstrap for n in cluster.ids if n not in down)


def create_topic(cluster: Cluster, name: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    wait_until(lambda: registered(cluster), timeout=30, what="every broker registered and unfenced")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 3, config=configs)])[name].result(timeout=30)


def partition_view(cluster: Cluster, topic: str, n: int) -> tuple[int, frozenset[int]]:
    """(leader, ISR) of partition 0 as node n's Metadata answers; (-1, set()) if it cannot say."""
    try:
        with RawClient(cluster.nodes[n].bootstrap, timeout=3.0) as c:
            t = metadata_raw(c, [topic]).topics[0]
    except OSError:
        return -1, frozenset()
    if t.error_code or not t.partitions:
        return -1, frozenset()
    p = t.partitions[0]
    return p.leader_id, frozenset(p.isr_nodes)


def wait_isr(cluster: Cluster, topic: str, isr: set[int], down: set[int] = frozenset(), timeout: float = 20.0) -> int:
    """Wait until every live node names the same leader (in `isr`) and ISR `isr`; the leader."""
    found = []

    def ok() -> bool:
        views = {partition_view(cluster, topic, n) for n in cluster.ids if n not in down}
        if len(views) != 1:
            return False
        leader, got = views.pop()
        found[:] = [leader]
        return leader in isr and got == isr
    wait_until(ok, timeout=timeout, what=f"ISR of {topic} == {sorted(isr)} on every live node")
    return found[0]


def test_acks_all_survives_kill_9_of_the_leader_without_loss_or_duplicates(cluster):
    from confluent_kafka import Producer
    create_topic(cluster, "r", {"min.insync.replicas": "2"})
    leader = wait_isr(cluster, "r", {1, 2, 3})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 40000, "retry.backoff.ms": 50,
                         "topic.metadata.refresh.interval.ms": 500, "socket.connection.setup.timeout.ms": 1000})
    acked: list[bytes] = []
    failed: list = []

    def delivered(err, msg) -> None:
        (failed.append(err) if err is not None else acked.append(msg.value()))

    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set() and i < 3000:
            try:
                producer.produce("r", value=b"%d" % i, callback=delivered)
                i += 1
            except BufferError:
                pass
            producer.poll(0.002)
    t = threading.Thread(target=produce)
    t.start()
    wait_until(lambda: len(acked) >= 300, timeout=20, what="300 acknowledged before the kill")
    cluster.kill(leader)
    survivors = {n for n in cluster.ids if n != leader}
    new_leader = wait_isr(cluster, "r", survivors, down={leader}, timeout=30)
    assert new_leader != leader
    acked_at_kill = len(acked)
    wait_until(lambda: len(acked) >= acked_at_kill + 300, timeout=30, what="300 more acknowledged by the new leader")
    stop.set()
    t.join()
    assert producer.flush(40) == 0
    assert not failed, failed  # no fatal error: the new leader continued the producer's sequences
    values = [v for _o, _k, v in fetch_all(cluster.nodes[new_leader].bootstrap, "r")]
    assert len(values) == len(set(values)), "duplicates in the log"
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost"
    assert len(acked) >= 600


def test_min_insync_replicas_refuses_acks_all_until_the_restarted_replica_rejoins(cluster):
    create_topic(cluster, "m", {"min.insync.replicas": "3"})
    leader = wait_isr(cluster, "m", {1, 2, 3})
    follower = next(n for n in cluster.ids if n != leader)
    with RawClient(cluster.nodes[leader].bootstrap) as c:
        code = produce_raw(c, "m", build_batch([b"a"]), acks=-1).error_code
        assert code == 0, code
    with RawClient(cluster.nodes[follower].bootstrap) as c:  # only the leader serves clients
        assert produce_raw(c, "m", build_batch([b"x"]), acks=1).error_code == NOT_LEADER_OR_FOLLOWER
        assert fetch_once(c, "m", 0, 0).error_code == NOT_LEADER_OR_FOLLOWER
    cluster.kill(follower)
    rest = {n for n in cluster.ids if n != follower}
    assert wait_isr(cluster, "m", rest, down={follower}) == leader
    with RawClient(cluster.nodes[leader].bootstrap) as c:
        assert produce_raw(c, "m", build_batch([b"b"]), acks=-1).error_code == NOT_ENOUGH_REPLICAS
        assert produce_raw(c, "m", build_batch([b"c"]), acks=1).error_code == 0  # acks=1 needs no ISR
    cluster.restart(follower)
    assert wait_isr(cluster, "m", {1, 2, 3}) == leader
    with RawClient(cluster.nodes[leader].bootstrap) as c:
        assert produce_raw(c, "m", build_batch([b"d"]), acks=-1).error_code == 0
    assert [v for _o, _k, v in fetch_all(cluster.nodes[leader].bootstrap, "m")] == [b"a", b"c", b"d"]


def test_a_former_leader_truncates_what_only_it_had(cluster):
    create_topic(cluster, "d", {"min.insync.replicas": "2"})
    leader = wait_isr(cluster, "d", {1, 2, 3})
    others = [n for n in cluster.ids if n != leader]
    with RawClient(cluster.nodes[leader].bootstrap) as c:
        assert produce_raw(c, "d", build_batch([b"kept"]), acks=-1).error_code == 0
    for n in others:  # the followers stop: what the leader takes now only it has
        cluster.pause(n)
    time.sleep(0.5)  # their long-polls still waiting on the leader end (replica.fetch.wait.max.ms) empty
    with RawClient(cluster.nodes[leader].bootstrap) as c:
        assert produce_raw(c, "d", build_batch([b"lost-1", b"lost-2"]), acks=1).error_code == 0
    # consumers read below the high watermark only: the followers have not fetched it, so not yet
    assert [v for _o, _k, v in fetch_all(cluster.nodes[leader].bootstrap, "d")] == [b"kept"]
    cluster.kill(leader)
    for n in others:
        cluster.resume(n)
    new_leader = wait_isr(cluster, "d", set(others), down={leader}, timeout=30)
    with RawClient(cluster.nodes[new_leader].bootstrap) as c:
        assert produce_raw(c, "d", build_batch([b"new-1", b"new-2", b"new-3"]), acks=-1).error_code == 0
    cluster.restart(leader)
    wait_isr(cluster, "d", {1, 2, 3}, timeout=30)  # it can only rejoin after truncating
    assert "diverged from leader" in cluster.nodes[leader].log_path.read_text()
    expected = [b"kept", b"new-1", b"new-2", b"new-3"]
    assert [v for _o, _k, v in fetch_all(cluster.nodes[new_leader].bootstrap, "d")] == expected
    # its own log: stop it and read the partition files
    cluster.nodes[leader].stop()
    from minikafka.storage.log_config import LogConfig
    from minikafka.storage.partition_log import PartitionLog
    from tests.support.helpers import decode_records
    plog = PartitionLog(cluster.nodes[leader].data_dir / "d-0", LogConfig())
    try:
        assert [v for _o, _k, v in decode_records(plog.read(0, 1 << 20))] == expected
    finally:
        plog.close()


@pytest.fixture
def fresh(tmp_path):
    """A cluster of its own (the shared one carries the restarts of the tests before)."""
    c = Cluster(tmp_path, config=CONFIG).start()
    try:
        wait_until(lambda: registered(c), timeout=30, what="every broker registered and unfenced")
        yield c
    finally:
        c.stop()


def test_two_of_three_down_nothing_is_acknowledged_with_acks_all(fresh):
    """Two nodes down is no metadata quorum: the ISR cannot shrink (as in Kafka's combined mode), so the
    surviving leader cannot advance its high watermark and acknowledges nothing with acks=all; what
    it did append unacknowledged is either kept or truncated later, never reported as written."""
    from confluent_kafka import KafkaError, Producer
    cluster = fresh
    create_topic(cluster, "q", {"min.insync.replicas": "2"})
    leader = wait_isr(cluster, "q", {1, 2, 3})
    with RawClient(cluster.nodes[leader].bootstrap) as c:
        assert produce_raw(c, "q", build_batch([b"before"]), acks=-1).error_code == 0
    others = [n for n in cluster.ids if n != leader]
    for n in others:
        cluster.kill(n)
    producer = Producer({"bootstrap.servers": cluster.nodes[leader].bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 4000, "request.timeout.ms": 1500})
    outcomes: list = []
    for i in range(5):
        producer.produce("q", value=b"during-%d" % i, callback=lambda err, _m: outcomes.append(err))
    producer.flush(20)
    # Apache Kafka 4.3's three-node cluster answers the same (checked with the same script): every
    # record times out in the client, none is acknowledged
    assert len(outcomes) == 5 and all(err is not None and err.code() == KafkaError._MSG_TIMED_OUT
                                      for err in outcomes), outcomes
    # and consumers see nothing past the high watermark
    assert [v for _o, _k, v in fetch_all(cluster.nodes[leader].bootstrap, "q")] == [b"before"]
