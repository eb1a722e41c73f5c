"""confluent-kafka consumers with group.protocol=consumer (KIP-848) against the broker: 1 -> 3 -> 1
members with the uniform and range server assignors, no partition held by two members at once, no
committed offset lost or regressed; a static member restarting without a rebalance; a regex
subscription picking up a new topic. Runs against minikafka and Kafka (--broker=kafka); the cases
that need a short session timeout or a broker kill run on minikafka only."""
from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import BrokerProcess, _other_broker, broker_kind
from tests.support.consumer_protocol_helpers import (
    FAST_CONSUMER_GROUPS,
    OwnershipLog,
    ProtocolConsumer,
    SubprocessProtocolConsumer,
    describe,
    ready_coordinator,
)
from tests.support.group_helpers import committed_offsets, create_topic, produce, unique
from tests.support.helpers import RawClient, wait_until

PARTITIONS = 6


@pytest.fixture(scope="module")
def cg_broker(request, tmp_path_factory):
    """One broker per module: minikafka with 1 s heartbeats and a 6 s session, or the oracle."""
    if broker_kind(request.config) != "minikafka":
        yield _other_broker(request)
        return
    d = tmp_path_factory.mktemp("cgp") / "data"
    d.mkdir()
    b = BrokerProcess(d, FAST_CONSUMER_GROUPS).start()
    yield b
    if b.alive():
        b.stop()
    assert "Traceback" not in b.log_text(), b.log_text()


class CommitWatcher:
    """Polls the group's committed offsets in the background; fails if one ever goes backwards."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        self.args = (bootstrap, group, topic, partitions)
        self.last: dict[int, int] = {}
        self.regressions: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            try:
                now = committed_offsets(*self.args)
            except Exception:
                continue
            for p, o in now.items():
                if o < 0:
                    continue  # nothing committed yet
                if o < self.last.get(p, -1):
                    self.regressions.append(f"partition {p}: {self.last[p]} -> {o}")
                self.last[p] = max(o, self.last.get(p, -1))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def wait_members(consumers, expected: list[int], timeout: float = 60.0) -> None:
    """Until the consumers' assignments have the sizes `expected` (sorted) and cover every partition."""
    def check():
        sizes = sorted(len(c.assignment) for c in consumers)
        held = [tp for c in consumers for tp in c.assignment]
        return sizes == sorted(expected) and len(held) == len(set(held)) == PARTITIONS
    wait_until(check, timeout=timeout, interval=0.2,
               what=f"assignments of sizes {expected}: {[sorted(c.assignment) for c in consumers]}")


def consumed(consumers) -> list[bytes]:
    return [v for c in consumers for v in c.values()]


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_one_three_one(cg_broker, assignor):
    bs = cg_broker.bootstrap
    topic = create_topic(bs, unique(f"cgp-{assignor}"), PARTITIONS)
    group = unique(f"cg-{assignor}")
    log = OwnershipLog()
    conf = {"group.remote.assignor": assignor}
    produced = produce(bs, topic, PARTITIONS, 60)
    a = ProtocolConsumer(bs, group, [topic], "a", log, **conf)
    others: list[ProtocolConsumer] = []
    watcher = CommitWatcher(bs, group, topic, PARTITIONS)
    try:
        wait_members([a], [PARTITIONS])
        wait_until(lambda: set(produced) <= set(consumed([a])), timeout=30, what="a consumes the first 60")

        others = [ProtocolConsumer(bs, group, [topic], name, log, **conf) for name in ("b", "c")]
        wait_members([a, *others], [2, 2, 2])
        produced += produce(bs, topic, PARTITIONS, 60, start=60)
        wait_until(lambda: set(produced) <= set(consumed([a, *others])), timeout=30, what="120 consumed by 3")
        with RawClient(bs) as c:
            g = describe(c, group)[group]
        assert g.error_code == 0 and g.assignor_name == assignor and len(g.members) == 3

        for o in others:
            o.stop()
        wait_members([a], [PARTITIONS])
        produced += produce(bs, topic, PARTITIONS, 60, start=120)
        wait_until(lambda: set(produced) <= set(consumed([a, *others])), timeout=30, what="180 consumed")
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 30 for p in range(PARTITIONS)},
                   timeout=30, what="every partition committed at 30")
    finally:
        a.stop()
        for o in others:
            o.stop()
        watcher.stop()
    log.assert_never_shared()
    assert not watcher.regressions, watcher.regressions
    assert set(consumed([a, *others])) == set(produced)


def test_static_member_restart_keeps_its_partitions(cg_broker):
    bs = cg_broker.bootstrap
    topic = create_topic(bs, unique("cgp-static"), PARTITIONS)
    group = unique("cg-static")
    log = OwnershipLog()
    a = ProtocolConsumer(bs, group, [topic], "a", log, **{"group.instance.id": "static-a"})
    b = ProtocolConsumer(bs, group, [topic], "b", log, **{"group.instance.id": "static-b"})
    try:
        wait_members([a, b], [3, 3])
        before = set(a.assignment)
        with RawClient(bs) as c:
            epoch = describe(c, group)[group].group_epoch
        t0 = time.monotonic()
        a.stop()  # a static member's close() is a temporary leave (epoch -2): b keeps its partitions
        a = ProtocolConsumer(bs, group, [topic], "a2", log, **{"group.instance.id": "static-a"})
        wait_members([a, b], [3, 3], timeout=30)
        t1 = time.monotonic()
        assert set(a.assignment) == before
        with RawClient(bs) as c:
            g = describe(c, group)[group]
        assert g.group_epoch == epoch, "a static member's restart does not bump the group epoch"
        assert sorted(m.instance_id for m in g.members) == ["static-a", "static-b"]
    finally:
        a.stop()
        b.stop()
    assert not [e for e in log.events if e[1] == "b" and t0 <= e[0] <= t1], "b saw a rebalance"
    log.assert_never_shared()


def test_regex_subscription_picks_up_new_topic(cg_broker):
    bs = cg_broker.bootstrap
    prefix = unique("cgp-regex")
    first = create_topic(bs, f"{prefix}-one", 2)
    group = unique("cg-regex")
    a = ProtocolConsumer(bs, group, [f"^{prefix}-.*"], "a")
    try:
        values = produce(bs, first, 2, 10)
        wait_until(lambda: set(values) <= set(a.values()), timeout=60, what="regex member consumes topic one")
        second = create_topic(bs, f"{prefix}-two", 2)
        more = produce(bs, second, 2, 10, start=10)
        wait_until(lambda: set(more) <= set(a.values()), timeout=90, what="the new topic is picked up")
        with RawClient(bs) as c:
            (m,) = describe(c, group)[group].members
        assert f"^{prefix}-.*" in m.subscribed_topic_regex  # librdkafka sends "(regex)"
    finally:
        a.stop()


@pytest.mark.minikafka_only
def test_killed_member_partitions_move_after_session_timeout(broker_factory):
    broker = broker_factory(FAST_CONSUMER_GROUPS)
    bs = broker.bootstrap
    topic = create_topic(bs, unique("cgp-kill"), PARTITIONS)
    group = unique("cg-kill")
    a = ProtocolConsumer(bs, group, [topic], "a")
    k = SubprocessProtocolConsumer(bs, group, topic)
    try:
        wait_until(lambda: len(a.assignment) == 3 and len(k.assigned) == 3, timeout=60, what="3 + 3")
        k.kill()
        t0 = time.monotonic()
        wait_until(lambda: len(a.assignment) == PARTITIONS, timeout=30, what="a takes over the killed member's")
        assert time.monotonic() - t0 > 3.0, "a killed member is only fenced by its session timeout (6 s)"
    finally:
        k.kill()
        a.stop()


@pytest.mark.minikafka_only
def test_group_state_and_offsets_survive_kill9(broker_factory):
    broker = broker_factory(FAST_CONSUMER_GROUPS)
    bs = broker.bootstrap
    topic = create_topic(bs, unique("cgp-crash"), PARTITIONS)
    group = unique("cg-crash")
    produced = produce(bs, topic, PARTITIONS, 60)
    members = [SubprocessProtocolConsumer(bs, group, topic) for _ in range(2)]
    try:
        wait_until(lambda: sorted(len(m.assigned) for m in members) == [3, 3], timeout=60, what="3 + 3")
        wait_until(lambda: committed_offsets(bs, group, topic, PARTITIONS) == {p: 10 for p in range(PARTITIONS)},
                   timeout=30, what="every partition committed at 10")
        with RawClient(bs) as c:
            before = describe(c, group)[group]
    finally:
        for m in members:
            m.kill()  # -9: no leave
    broker.kill()
    broker.start()
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        after = describe(c, group)[group]
    assert (after.group_state, after.group_epoch, after.assignment_epoch) == \
        (before.group_state, before.group_epoch, before.assignment_epoch)

    def members_of(g):
        return sorted((m.member_id, m.member_epoch, sorted((tp.topic_name, tuple(sorted(tp.partitions)))
                                                           for tp in m.assignment.topic_partitions))
                      for m in g.members)
    assert members_of(after) == members_of(before)
    assert committed_offsets(bs, group, topic, PARTITIONS) == {p: 10 for p in range(PARTITIONS)}
    # the group carries on: the dead members are fenced after their session timeout and a new member
    # resumes at the committed offsets
    more = produce(bs, topic, PARTITIONS, 12, start=60)
    c1 = ProtocolConsumer(bs, group, [topic], "c1")
    try:
        wait_until(lambda: set(more) <= set(c1.values()), timeout=60, what="resumed after the crash")
        assert not set(produced) & set(c1.values())
    finally:
        c1.stop()
    assert "Traceback" not in broker.log_text()
