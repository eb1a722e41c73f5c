"""Helpers for consumer-group tests: a module broker with no initial rebalance delay, topic setup,
group inspection through the admin API, and consumers that poll in their own thread."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid

import pytest

from tests.conftest import ROOT, BrokerProcess, _other_broker, broker_kind
from tests.support.helpers import wait_topic_ready, wait_until

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def group_broker(request, tmp_path_factory):
    """One broker per module; minikafka with group.initial.rebalance.delay.ms=0, like the Kafka lab."""
    if broker_kind(request.config) != "minikafka":
        yield _other_broker(request)
        return
    d = tmp_path_factory.mktemp("groups") / "data"
    d.mkdir()
    b = BrokerProcess(d, FAST_GROUPS).start()
    yield b
    if b.alive():
        b.stop()
    assert "Traceback" not in b.log_text(), b.log_text()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(30)
    wait_topic_ready(bootstrap, name, partitions)
    return name


def produce(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0) -> list[bytes]:
    """`count` values v<start..start+count-1>, round-robin over partitions; returns them."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [b"v%d" % i for i in range(start, start + count)]
    for i, v in enumerate(values, start):
        p.produce(topic, key=b"k%d" % i, value=v, partition=i % partitions)
    assert p.flush(30) == 0
    return values


def describe_group(bootstrap: str, group: str):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(30)


def group_assignment(bootstrap: str, group: str) -> dict[str, set[tuple[str, int]]]:
    """member id -> assigned (topic, partition), from DescribeGroups (empty unless Stable)."""
    d = describe_group(bootstrap, group)
    return {m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} for m in d.members}


def wait_assignment(bootstrap: str, group: str, members: int, partitions: set[tuple[str, int]],
                    timeout: float = 30.0) -> dict[str, set[tuple[str, int]]]:
    """Until the group is Stable with `members` members and every partition assigned exactly once."""
    def check():
        try:
            a = group_assignment(bootstrap, group)
        except Exception:
            return None
        owned = [tp for tps in a.values() for tp in tps]
        if len(a) == members and sorted(owned) == sorted(partitions) and all(a.values()):
            return a
        return None
    return wait_until(check, timeout=timeout, interval=0.2,
                      what=f"{group}: {members} members owning {len(partitions)} partitions")


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin.list_consumer_group_offsets([req])[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


class ThreadConsumer:
    """A confluent-kafka consumer owned by one thread: polls, records (partition, offset, value), and
    commits synchronously after every batch, until stop() (close = LeaveGroup)."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf) -> None:
        from confluent_kafka import Consumer

        settings = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                    "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                    "topic.metadata.refresh.interval.ms": 1000}
        settings.update(conf)
        self._consumer = Consumer(settings)
        self.events: list[tuple[str, set[int]]] = []  # ("assign" | "revoke", partitions), as callbacks saw them
        self._consumer.subscribe(
            [topic], on_assign=lambda c, tps: self.events.append(("assign", {tp.partition for tp in tps})),
            on_revoke=lambda c, tps: self.events.append(("revoke", {tp.partition for tp in tps})))
        self.records: list[tuple[int, int, bytes]] = []
        self.assignment: set[int] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self._consumer
        try:
            while not self._stop.is_set():
                msgs = c.consume(num_messages=500, timeout=0.1)
                got = False
                for m in msgs:
                    if m.error():
                        self.errors.append(str(m.error()))
                        continue
                    self.records.append((m.partition(), m.offset(), m.value()))
                    got = True
                if got:
                    try:
                        c.commit(asynchronous=False)
                    except Exception as exc:  # a rebalance may revoke partitions mid-commit
                        self.errors.append(f"commit: {exc}")
                self.assignment = {tp.partition for tp in c.assignment()}
        finally:
            c.close()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "consumer thread did not stop"

    def values(self) -> list[bytes]:
        return [v for _, _, v in self.records]


SUBPROCESS_CONSUMER = r"""
import json, sys
from confluent_kafka import Consumer
bootstrap, group, topic = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
c.subscribe([topic])
while True:
    msgs = c.consume(num_messages=500, timeout=0.1)
    good = [m for m in msgs if not m.error()]
    if good:
        c.commit(asynchronous=False)
        for m in good:
            print(json.dumps([m.partition(), m.offset(), m.value().decode()]), flush=True)
"""


class SubprocessConsumer:
    """A confluent-kafka group member in its own process, so that it can be killed -9."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", SUBPROCESS_CONSUMER, bootstrap, group, topic],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        self.records: list[tuple[int, int, bytes]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            p, o, v = json.loads(line)
            self.records.append((p, o, v.encode()))

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def values(self) -> list[bytes]:
        return [v for _, _, v in self.records]


class KafkaPythonConsumer:
    """A kafka-python KafkaConsumer polling in its own thread, committing after every batch."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf) -> None:
        from kafka import KafkaConsumer

        settings = dict(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
                        metadata_max_age_ms=1000)
        settings.update(conf)
        self._consumer = KafkaConsumer(**settings)
        # Know the topic's partitions before joining: a kafka-python 3.0.12 leader that joins without
        # them assigns nothing, rejoins as soon as metadata arrives, and can then stall with heartbeats
        # disabled when that second SyncGroup answer races the metadata response (seen with fast
        # coordinators; not broker behaviour).
        wait_until(lambda: self._consumer.partitions_for_topic(topic), timeout=15, what=f"metadata of {topic}")
        self._consumer.subscribe([topic])
        self.records: list[tuple[int, int, bytes]] = []
        self.assignment: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self._consumer
        try:
            while not self._stop.is_set():
                batches = c.poll(timeout_ms=100)
                for tp, msgs in batches.items():
                    self.records.extend((m.partition, m.offset, m.value) for m in msgs)
                if batches:
                    c.commit()
                self.assignment = {tp.partition for tp in c.assignment()}
        finally:
            c.close()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "consumer thread did not stop"

    def values(self) -> list[bytes]:
        return [v for _, _, v in self.records]


class AioConsumer:
    """An aiokafka AIOKafkaConsumer on its own event loop thread, committing after every batch."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf) -> None:
        import asyncio

        self._conf = dict(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
                          metadata_max_age_ms=1000)
        self._conf.update(conf)
        self._topic = topic
        self.records: list[tuple[int, int, bytes]] = []
        self.assignment: set[int] = set()
        self._stop = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._run(),), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        import asyncio

        from aiokafka import AIOKafkaConsumer

        c = AIOKafkaConsumer(self._topic, **self._conf)
        await c.start()
        try:
            while not self._stop.is_set():
                batches = await c.getmany(timeout_ms=100)
                for tp, msgs in batches.items():
                    self.records.extend((m.partition, m.offset, m.value) for m in msgs)
                if batches:
                    await c.commit()
                self.assignment = {tp.partition for tp in c.assignment()}
                await asyncio.sleep(0)
        finally:
            await c.stop()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "consumer thread did not stop"

    def values(self) -> list[bytes]:
        return [v for _, _, v in self.records]


class RawMember:
    """A group member speaking the protocol directly (kafka.protocol over RawClient), to look at
    generations and errors that stock clients hide."""

    def __init__(self, bootstrap: str, group: str, topic: str, session_timeout_ms: int = 30000,
                 instance_id: str | None = None) -> None:
        from tests.support.helpers import RawClient

        self.client = RawClient(bootstrap, client_id="raw-member")
        self.group, self.topic = group, topic
        self.session_timeout_ms = session_timeout_ms
        self.instance_id = instance_id
        self.member_id = ""
        self.generation = -1

    def find_coordinator(self, timeout: float = 15.0) -> None:
        from kafka.protocol.metadata import FindCoordinatorRequest

        wait_until(lambda: self.client.request(FindCoordinatorRequest(key=self.group, key_type=0), 3).error_code == 0,
                   timeout=timeout, interval=0.2, what="FindCoordinator")
        # Kafka may still be loading or electing the group's __consumer_offsets partition
        # (COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR for a moment)
        from kafka.protocol.consumer import OffsetFetchRequest

        probe = OffsetFetchRequest(group_id=self.group, topics=None, require_stable=False)
        wait_until(lambda: self.client.request(probe, 7).error_code not in (14, 15, 16), timeout=timeout,
                   interval=0.2, what="the group coordinator to be ready")

    def join(self, version: int = 5):
        from kafka.protocol.consumer import JoinGroupRequest
        from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

        meta = ConsumerProtocolSubscription(version=0, topics=[self.topic], user_data=b"").encode(version=0)
        req = JoinGroupRequest(group_id=self.group, session_timeout_ms=self.session_timeout_ms,
                               rebalance_timeout_ms=10000, member_id=self.member_id,
                               group_instance_id=self.instance_id, protocol_type="consumer",
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)],
                               reason=None)
        resp = self.client.request(req, version)
        if resp.error_code == 79:  # MEMBER_ID_REQUIRED: join again with the id the coordinator chose
            self.member_id = req.member_id = resp.member_id
            resp = self.client.request(req, version)
        if resp.error_code == 0:
            self.member_id, self.generation = resp.member_id, resp.generation_id
        return resp

    def sync(self, assignments: dict[str, bytes] | None = None, version: int = 5):
        from kafka.protocol.consumer import SyncGroupRequest

        req = SyncGroupRequest(group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                               group_instance_id=self.instance_id, protocol_type="consumer", protocol_name="range",
                               assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                            for m, a in (assignments or {}).items()])
        return self.client.request(req, version)

    def heartbeat(self, generation: int | None = None, member_id: str | None = None) -> int:
        from kafka.protocol.consumer import HeartbeatRequest

        req = HeartbeatRequest(group_id=self.group, generation_id=self.generation if generation is None else generation,
                               member_id=self.member_id if member_id is None else member_id,
                               group_instance_id=self.instance_id)
        return self.client.request(req, 4).error_code

    def commit(self, offsets: dict[int, int], generation: int | None = None, member_id: str | None = None,
               version: int = 8, topic: str | None = None) -> dict[int, int]:
        from kafka.protocol.consumer import OffsetCommitRequest

        T = OffsetCommitRequest.OffsetCommitRequestTopic
        req = OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id, group_instance_id=self.instance_id,
            retention_time_ms=-1, topics=[T(name=topic or self.topic, partitions=[
                T.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                               committed_metadata="raw") for p, o in offsets.items()])])
        resp = self.client.request(req, version)
        return {p.partition_index: p.error_code for p in resp.topics[0].partitions}

    def fetch(self, partitions: list[int], version: int = 7) -> dict[int, tuple[int, int]]:
        """partition -> (committed offset, error)."""
        from kafka.protocol.consumer import OffsetFetchRequest

        req = OffsetFetchRequest(group_id=self.group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=self.topic, partition_indexes=partitions)], require_stable=False)
        resp = self.client.request(req, version)
        return {p.partition_index: (p.committed_offset, p.error_code) for p in resp.topics[0].partitions}

    def close(self) -> None:
        self.client.close()
