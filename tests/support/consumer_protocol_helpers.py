"""Helpers for KIP-848 consumer group tests: raw ConsumerGroupHeartbeat/Describe calls, and
confluent-kafka consumers with `group.protocol=consumer` that log when they gained and lost each
partition (to prove that no partition is ever held by two members at once)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from minikafka.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.conftest import ROOT
from tests.support.helpers import RawClient, wait_until

HB_VERSION = 1
# minikafka: heartbeats every second and a 6 s session, so tests of timeouts run in seconds
FAST_CONSUMER_GROUPS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "6000",
}


def ready_coordinator(client: RawClient, group: str, timeout: float = 30.0) -> None:
    """FindCoordinator until it answers (creates __consumer_offsets on first use), then until the
    group's partition is loaded."""
    from kafka.protocol.consumer import OffsetFetchRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    wait_until(lambda: client.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code == 0,
               timeout=timeout, interval=0.2, what="FindCoordinator")
    probe = OffsetFetchRequest(group_id=group, topics=None, require_stable=False)
    wait_until(lambda: client.request(probe, 7).error_code not in (14, 15, 16), timeout=timeout, interval=0.2,
               what="the group coordinator to be ready")


def heartbeat(client: RawClient, group: str, member_id: str, epoch: int, *, topics=None, regex=None,
              owned=None, instance_id=None, rebalance_timeout_ms=None, assignor=None,
              version: int = HB_VERSION) -> ConsumerGroupHeartbeatResponse:
    if rebalance_timeout_ms is None:
        rebalance_timeout_ms = 30000 if epoch == 0 else -1
    if epoch == 0 and owned is None:
        owned = []
    parts = None
    if owned is not None:
        TP = ConsumerGroupHeartbeatRequest.TopicPartitions
        parts = [TP(topic_id=t, partitions=sorted(ps)) for t, ps in owned]
    kwargs = dict(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
                  rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=topics, server_assignor=assignor,
                  topic_partitions=parts)
    if version >= 1:
        kwargs["subscribed_topic_regex"] = regex
    return client.request(ConsumerGroupHeartbeatRequest(**kwargs), version, ConsumerGroupHeartbeatResponse)


def describe(client: RawClient, *groups: str, version: int = 1):
    resp = client.request(ConsumerGroupDescribeRequest(group_ids=list(groups), include_authorized_operations=False),
                          version, ConsumerGroupDescribeResponse)
    return {g.group_id: g for g in resp.groups}


def owned_of(resp: ConsumerGroupHeartbeatResponse):
    """The assignment of a heartbeat response as [(topic id, partitions)] (what to report as owned)."""
    if resp.assignment is None:
        return None
    return [(tp.topic_id, list(tp.partitions)) for tp in resp.assignment.topic_partitions]


class OwnershipLog:
    """When each consumer gained and lost each partition (monotonic time), shared by consumers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[float, str, str, tuple[str, int]]] = []

    def add(self, who: str, kind: str, tps) -> None:
        now = time.monotonic()
        with self.lock:
            for tp in tps:
                self.events.append((now, who, kind, (tp.topic, tp.partition)))

    def assert_never_shared(self) -> None:
        """Replay the log: a partition is gained only while no other consumer holds it."""
        holder: dict[tuple[str, int], str] = {}
        with self.lock:
            events = sorted(self.events, key=lambda e: e[0])
        for _, who, kind, tp in events:
            if kind == "assign":
                assert holder.get(tp) in (None, who), f"{tp} assigned to {who} while {holder[tp]} holds it"
                holder[tp] = who
            elif holder.get(tp) == who:
                del holder[tp]


class ProtocolConsumer:
    """A confluent-kafka consumer with group.protocol=consumer in its own thread: polls, records
    (partition, offset, value), commits synchronously after each batch, and logs gained/lost
    partitions in `ownership`."""

    def __init__(self, bootstrap: str, group: str, topics, name: str, ownership: OwnershipLog | None = None,
                 **conf) -> None:
        from confluent_kafka import Consumer

        settings = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False,
                    "topic.metadata.refresh.interval.ms": 1000}
        settings.update(conf)
        self.name = name
        self.ownership = ownership or OwnershipLog()
        self._consumer = Consumer(settings)
        self._consumer.subscribe(list(topics), on_assign=lambda c, tps: self.ownership.add(name, "assign", tps),
                                 on_revoke=lambda c, tps: self.ownership.add(name, "revoke", tps),
                                 on_lost=lambda c, tps: self.ownership.add(name, "lost", tps))
        self.records: list[tuple[str, int, int, bytes]] = []
        self.assignment: set[tuple[str, int]] = set()
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
                    self.records.append((m.topic(), m.partition(), m.offset(), m.value()))
                    got = True
                if got:
                    try:
                        c.commit(asynchronous=False)
                    except Exception as exc:  # a rebalance may take partitions away mid-commit
                        self.errors.append(f"commit: {exc}")
                self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
        finally:
            c.close()

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"consumer {self.name} did not stop"

    def values(self) -> list[bytes]:
        return [v for *_, v in self.records]


SUBPROCESS_CONSUMER = r"""
import json, sys
from confluent_kafka import Consumer
bootstrap, group, topic = sys.argv[1:4]
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
def report(kind):
    return lambda c, tps: print(json.dumps([kind, [tp.partition for tp in tps]]), flush=True)
c.subscribe([topic], on_assign=report("assign"), on_revoke=report("revoke"), on_lost=report("revoke"))
while True:
    msgs = c.consume(num_messages=500, timeout=0.1)
    good = [m for m in msgs if not m.error()]
    if good:
        c.commit(asynchronous=False)
        for m in good:
            print(json.dumps(["record", m.partition(), m.offset()]), flush=True)
"""


class SubprocessProtocolConsumer:
    """A group.protocol=consumer member in its own process, so that it can be killed -9."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-c", SUBPROCESS_CONSUMER, bootstrap, group, topic],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        self.assigned: set[int] = set()  # as its rebalance callbacks last reported
        self.records: list[tuple[int, int]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, *rest = json.loads(line)
            if kind == "assign":
                self.assigned.update(rest[0])
            elif kind == "revoke":
                self.assigned.difference_update(rest[0])
            else:
                self.records.append(tuple(rest))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
