"""AlterReplicaLogDirs (API 34) with several log.dirs (JBOD), as Apache Kafka 4.3.1 answers it. Every test
but one runs on both brokers (with --broker=kafka the two-dir tests start a lab Kafka of their own with two
log.dirs, as the ACL test starts a secured one).

A relative or unknown dir is LOG_DIR_NOT_FOUND, an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, a
partition moved to the dir it is in NONE, without ALTER on the cluster every partition is
CLUSTER_AUTHORIZATION_FAILED. Two dirs: a move while producers write (idempotent and transactional, a
transaction open across the move), everything consumed back exactly once (read_committed), DescribeLogDirs
showing the partition in its new dir, a restart; `kafka-reassign-partitions --execute/--verify` with a
reassignment carrying "log_dirs" and `kafka-log-dirs --describe`; kill -9 during a move (one directory
after the restart, every record once); a cordoned destination (INVALID_REPLICA_ASSIGNMENT, as Kafka 4.3.1's
ReplicaManager). minikafka only: the move observed as a future replica (Kafka's may be too quick to see).
"""
from __future__ import annotations

import json
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka.protocol.admin import (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest,
                                  DescribeLogDirsResponse)

from minikafka.broker.security import acl as A
from tests.conftest import ROOT
from tests.support.authz_helpers import CLUSTER_DENIED, secured_broker
from tests.support.helpers import RawClient, confluent_consume, metadata_raw, wait_topic_ready, wait_until

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

NONE, UNKNOWN_TOPIC_OR_PARTITION, LOG_DIR_NOT_FOUND, INVALID_REPLICA_ASSIGNMENT = 0, 3, 57, 39


def tag() -> str:
    return uuid.uuid4().hex[:8]


def alter(bootstrap: str, moves: dict[str, dict[str, list[int]]], version: int = 2) -> dict[tuple[str, int], int]:
    """AlterReplicaLogDirs {dir: {topic: [partitions]}} -> {(topic, partition): error code}."""
    D = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    req = AlterReplicaLogDirsRequest(dirs=[D(path=d, topics=[D.AlterReplicaLogDirTopic(name=t, partitions=ps)
                                                              for t, ps in topics.items()])
                                           for d, topics in moves.items()])
    with RawClient(bootstrap) as c:
        resp = c.request(req, version, AlterReplicaLogDirsResponse)
    return {(t.topic_name, p.partition_index): p.error_code for t in resp.results for p in t.partitions}


def where(bootstrap: str, topic: str) -> dict[tuple[int, bool], str]:
    """(partition, is future) -> the log dir DescribeLogDirs lists it in."""
    with RawClient(bootstrap) as c:
        resp = c.request(DescribeLogDirsRequest(topics=None), 4, DescribeLogDirsResponse)
    return {(p.partition_index, p.is_future_key): r.log_dir for r in resp.results for t in r.topics if t.name == topic
            for p in t.partitions}


def log_dirs(bootstrap: str) -> list[str]:
    with RawClient(bootstrap) as c:
        return [r.log_dir for r in c.request(DescribeLogDirsRequest(topics=None), 4, DescribeLogDirsResponse).results]


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    wait_topic_ready(bootstrap, topic, partitions)


@pytest.mark.parametrize("version", [1, 2])
def test_bad_input_gets_kafkas_error_codes(broker, version):
    bs = broker.bootstrap
    topic = f"arld-{tag()}"
    create(bs, topic)
    (home,) = {where(bs, topic)[(0, False)]}
    assert home in log_dirs(bs)
    got = alter(bs, {
        "relative/dir": {topic: [0]},
        "/no/such/dir": {f"{topic}-b": [0]},
        home: {topic: [0, 7], f"no-such-{tag()}": [0]},
    }, version)
    assert got[(topic, 0)] == NONE  # already there: nothing to do
    assert got[(topic, 7)] == UNKNOWN_TOPIC_OR_PARTITION
    assert got[(f"{topic}-b", 0)] == LOG_DIR_NOT_FOUND
    assert sorted(code for (t, _p), code in got.items() if t.startswith("no-such-")) == [UNKNOWN_TOPIC_OR_PARTITION]
    # a relative dir is LOG_DIR_NOT_FOUND (it was overridden above by the last dir naming the partition)
    assert alter(bs, {"relative/dir": {topic: [0]}}, version) == {(topic, 0): LOG_DIR_NOT_FOUND}
    assert alter(bs, {home + "/": {topic: [0]}}, version) == {(topic, 0): LOG_DIR_NOT_FOUND}
    assert where(bs, topic) == {(0, False): home}


@pytest.fixture  # torn down after its one test: one lab Kafka of this module at a time with --broker=kafka
def secured(request, tmp_path_factory):
    yield from secured_broker(request, tmp_path_factory)


def test_without_alter_on_the_cluster_every_partition_is_refused(secured):
    from tests.support.authz_helpers import binding, bootstrap_admin
    admin = bootstrap_admin(secured)
    try:
        topic = f"arld-acl-{tag()}"
        admin.create_topic(topic, partitions=2)
        deny = binding(A.CLUSTER, A.CLUSTER_NAME, A.ALTER, A.DENY)
        admin.grant(deny)
        try:
            wait_until(lambda: alter(secured, {"/no/such/dir": {topic: [0, 1]}}) == {
                (topic, 0): CLUSTER_DENIED, (topic, 1): CLUSTER_DENIED}, timeout=15, what="the deny ACL applied")
        finally:
            admin.revoke(deny)
    finally:
        admin.close()


# -- two log dirs: minikafka, or with --broker=kafka a lab Kafka of this module's own with two log.dirs ----

class Jbod:
    """A broker with two log dirs that this module may restart and kill -9."""

    def __init__(self, request, tmp_path_factory) -> None:
        from tests.conftest import BrokerProcess, broker_kind
        self.kind = broker_kind(request.config)
        if self.kind not in ("minikafka", "kafka"):
            pytest.skip("needs a broker this test can configure")
        work = tmp_path_factory.mktemp("jbod")
        if self.kind == "kafka":
            self.kafka = lab.KafkaBroker(work_dir=work / "kafka")
            self.dirs = [self.kafka.data_dir, self.kafka.work_dir / "data2"]
            self.overrides = {"log.dirs": ",".join(map(str, self.dirs)), "log.segment.bytes": "1048576"}
            self.kafka.start(overrides=self.overrides, timeout=180)
        else:
            self.dirs = [work / "d1", work / "d2"]
            (work / "data").mkdir()
            self.mk = BrokerProcess(work / "data", {"log.dirs": ",".join(map(str, self.dirs)),
                                                    "log.segment.bytes": "1048576"}).start()

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap if self.kind == "kafka" else self.mk.bootstrap

    def restart(self, kill: bool = False) -> None:
        if self.kind == "kafka":
            self.kafka.kill() if kill else self.kafka.stop()
            self.kafka.start(port=self.kafka.port, overrides=self.overrides, timeout=180)
        else:
            self.mk.kill() if kill else self.mk.stop()
            self.mk.start()

    def close(self) -> None:
        if self.kind == "kafka":
            self.kafka.stop()
            self.kafka.cleanup()
        elif self.mk.alive():
            self.mk.stop()
            assert "Traceback" not in self.mk.log_text(), self.mk.log_text()


@pytest.fixture(scope="module")
def jbod(request, tmp_path_factory):
    b = Jbod(request, tmp_path_factory)
    try:
        yield b
    finally:
        b.close()


def _other(dirs, home: str) -> str:
    (other,) = [str(d.resolve()) for d in dirs if str(d.resolve()) != home]
    return other


def _produce_idempotent(bs: str, topic: str, n: int, start: int = 0, size: int = 1000) -> None:
    errors = []
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5, "batch.size": 64 * 1024})
    for i in range(start, start + n):
        p.produce(topic, f"{i:08d}".encode() + b"x" * size, partition=0,
                  on_delivery=lambda err, _msg: err and errors.append(err))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert errors == []


def _values(bs: str, topic: str, n: int, **extra) -> list[int]:
    msgs = confluent_consume(bs, topic, {0: n}, timeout=60, **extra)[0]
    return [int(m.value()[:8]) for m in msgs]


def test_move_while_producing_keeps_every_record_exactly_once(jbod):
    dirs = jbod.dirs
    bs = jbod.bootstrap
    topic = f"arld-move-{tag()}"
    create(bs, topic)
    _produce_idempotent(bs, topic, 8000)  # ~8 MB in ~32 segments: the copy takes a while
    txp = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{tag()}"})
    txp.init_transactions(30)
    txp.begin_transaction()
    for i in range(100):
        txp.produce(topic, f"{90000 + i:08d}".encode(), partition=0)
    txp.flush(30)  # an open transaction across the move
    home = where(bs, topic)[(0, False)]
    dest = _other(dirs, home)
    during = threading.Thread(target=_produce_idempotent, args=(bs, topic, 3000, 10000))
    during.start()
    assert alter(bs, {dest: {topic: [0]}}) == {(topic, 0): NONE}
    during.join(120)
    wait_until(lambda: where(bs, topic) == {(0, False): dest}, timeout=60, what="the move finished")
    txp.commit_transaction(30)
    aborted = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{tag()}"})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    aborted.produce(topic, b"99999999", partition=0)
    aborted.flush(30)
    aborted.abort_transaction(30)
    _produce_idempotent(bs, topic, 1000, 20000)
    expected = sorted([*range(8000), *range(10000, 13000), *range(90000, 90100), *range(20000, 21000)])
    committed = _values(bs, topic, len(expected), **{"isolation.level": "read_committed"})
    assert sorted(committed) == expected and len(set(committed)) == len(committed)
    assert not (dirs[0 if dest == str(dirs[1].resolve()) else 1] / f"{topic}-0").exists()
    jbod.restart()
    bs = jbod.bootstrap
    assert where(bs, topic) == {(0, False): dest}
    assert sorted(_values(bs, topic, len(expected), **{"isolation.level": "read_committed"})) == expected
    _produce_idempotent(bs, topic, 10, 30000)  # appends go on


def test_reassign_partitions_tool_with_log_dirs(jbod, tmp_path):
    lab.fetch()
    dirs = jbod.dirs
    bs = jbod.bootstrap
    topic = f"arld-tool-{tag()}"
    create(bs, topic, 2)
    _produce_idempotent(bs, topic, 300)
    home = where(bs, topic)
    targets = {p: _other(dirs, home[(p, False)]) for p in (0, 1)}
    plan = tmp_path / "plan.json"
    node = _node(bs)
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [node], "log_dirs": [targets[p]]} for p in (0, 1)]}))
    res = lab.run_tool("kafka-reassign-partitions", ["--bootstrap-server", bs, "--reassignment-json-file",
                                                     str(plan), "--execute"], timeout=90)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Successfully started" in res.stdout, res.stdout

    def verified() -> bool:
        out = lab.run_tool("kafka-reassign-partitions", ["--bootstrap-server", bs, "--reassignment-json-file",
                                                         str(plan), "--verify"], timeout=90).stdout
        return all(f"Reassignment of replica {topic}-{p}-{node} completed successfully" in out for p in (0, 1))
    wait_until(verified, timeout=90, interval=1, what="the moves verified")
    res = lab.run_tool("kafka-log-dirs", ["--bootstrap-server", bs, "--describe", "--topic-list", topic], timeout=90)
    described = json.loads(res.stdout.strip().splitlines()[-1])
    (b,) = described["brokers"]
    placed = {(p["partition"], p["isFuture"]): d["logDir"] for d in b["logDirs"] for p in d["partitions"]}
    assert placed == {(f"{topic}-0", False): targets[0], (f"{topic}-1", False): targets[1]}
    assert sorted(_values(bs, topic, 300)) == list(range(300))


def test_kill_during_a_move_reopens_the_partition_once(jbod):
    """minikafka drops the partial copy at start (the partition stays where it was, the move is asked for
    again); Kafka resumes the move: either way one directory, every record once."""
    dirs = jbod.dirs
    bs = jbod.bootstrap
    topic = f"arld-kill-{tag()}"
    create(bs, topic)
    _produce_idempotent(bs, topic, 30000)  # ~30 MB
    home = where(bs, topic)[(0, False)]
    dest = _other(dirs, home)
    assert alter(bs, {dest: {topic: [0]}}) == {(topic, 0): NONE}
    time.sleep(0.2)
    jbod.restart(kill=True)
    bs = jbod.bootstrap
    wait_until(lambda: not any(p.name.endswith("-future") for d in dirs for p in d.iterdir()), timeout=60,
               what="no future replica left")
    placed = where(bs, topic)
    assert list(placed) == [(0, False)] and placed[(0, False)] in (home, dest)
    assert sorted(_values(bs, topic, 30000)) == list(range(30000))
    # asked again, the move completes
    if placed[(0, False)] == home:
        assert alter(bs, {dest: {topic: [0]}}) == {(topic, 0): NONE}
        wait_until(lambda: where(bs, topic) == {(0, False): dest}, timeout=60, what="the move finished")
    assert sorted(_values(bs, topic, 30000)) == list(range(30000))


@pytest.mark.minikafka_only  # Kafka's move of 30 MB may end between two DescribeLogDirs
def test_a_move_is_observable_as_a_future_replica_then_completes(jbod):
    dirs = jbod.dirs
    bs = jbod.bootstrap
    topic = f"arld-future-{tag()}"
    create(bs, topic)
    _produce_idempotent(bs, topic, 30000)
    home = where(bs, topic)[(0, False)]
    dest = _other(dirs, home)
    assert alter(bs, {dest: {topic: [0]}}) == {(topic, 0): NONE}
    seen = []
    wait_until(lambda: seen.append(where(bs, topic)) or seen[-1] == {(0, False): dest}, timeout=60, interval=0.02,
               what="the move finished")
    assert any(s.get((0, True)) == dest and s.get((0, False)) == home for s in seen), seen


def test_a_cordoned_dir_refuses_moves(jbod):
    dirs = jbod.dirs
    bs = jbod.bootstrap
    topic = f"arld-cord-{tag()}"
    create(bs, topic)
    home = where(bs, topic)[(0, False)]
    dest = _other(dirs, home)
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ConfigResource.Type.BROKER, str(_node(bs)), incremental_configs=[
        ConfigEntry("cordoned.log.dirs", dest, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    try:
        wait_until(lambda: alter(bs, {dest: {topic: [0]}}) == {(topic, 0): INVALID_REPLICA_ASSIGNMENT}, timeout=15,
                   what="the dir cordoned")
    finally:
        res = ConfigResource(ConfigResource.Type.BROKER, str(_node(bs)), incremental_configs=[
            ConfigEntry("cordoned.log.dirs", "", incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([res])[res].result(30)
    wait_until(lambda: alter(bs, {dest: {topic: [0]}}) == {(topic, 0): NONE}, timeout=15, what="uncordoned")
    wait_until(lambda: where(bs, topic) == {(0, False): dest}, timeout=60, what="the move finished")


def _node(bs: str) -> int:
    with RawClient(bs) as c:
        (node,) = [b.node_id for b in metadata_raw(c, [], version=12).brokers]
    return node
