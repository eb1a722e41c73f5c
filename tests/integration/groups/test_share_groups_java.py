"""Share groups (KIP-932) as the Java KafkaShareConsumer 4.3.1 (from the reference lab) drives them:
ShareGroupHeartbeat, ShareFetch (with piggybacked acknowledgements) and ShareAcknowledge, and the share
GROUP configs (share.auto.offset.reset, share.delivery.count.limit, share.record.lock.duration.ms,
share.isolation.level) set with Admin incrementalAlterConfigs or kafka-configs. Black-box: stock clients
over real sockets; runs against minikafka and, with --broker=kafka, against Apache Kafka 4.3.1.

tests/java/JavaShareConsumerCheck.java does the consuming; each run prints one line "RESULT {json}".
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from tests.conftest import ROOT
from tests.support.group_helpers import create_topic, group_broker, produce, unique  # noqa: F401

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

PROGRAM = ROOT / "tests" / "java" / "JavaShareConsumerCheck.java"
# Kafka's floor for group.share.record.lock.duration.ms / the share.record.lock.duration.ms group config
LOCK_MS = 15000


@pytest.fixture(scope="module", autouse=True)
def _lab_jars():
    lab.fetch()  # idempotent; fails loudly (never skips) if Maven Central cannot be reached


def java_cmd(mode: str, bootstrap: str, topic: str, group: str, *args: str) -> list[str]:
    return [lab.java_bin(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
            str(lab.libs_dir() / "*"), str(PROGRAM), mode, bootstrap, topic, group, *args]


def run_check(mode: str, bootstrap: str, topic: str, group: str, *args: str, timeout: float = 120) -> dict:
    proc = subprocess.run(java_cmd(mode, bootstrap, topic, group, *args), capture_output=True, text=True,
                          timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, \
        f"{mode} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def values(n: int, start: int = 0) -> set[str]:
    return {f"v{i}" for i in range(start, start + n)}


def test_implicit_ack_two_consumers_share_every_record_once(group_broker):
    """Two share consumers (implicit acknowledgement) in one group, both assigned before N records are
    produced: the union is exactly the N records, each delivered once (delivery count 1, never to both),
    both consumers got some, and a later member of the group finds nothing left (all ACCEPTed).

    "Assigned" means settled (both members at the target assignment, then longer than fetch.max.wait.ms):
    a member assigned first may get every partition and lose some at its next heartbeat once the other
    joins (minikafka assigns at the first heartbeat, Kafka once the share-partitions are initialized);
    records it acquired from a partition it then lost may be acknowledged after its client dropped that
    partition from its share session, and the Java client fails such an acknowledgement itself
    (NotLeaderOrFollowerException), whatever the broker (see implicit2 in JavaShareConsumerCheck.java)."""
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("share-imp"), 3)
    group = unique("sg-imp")
    n = 600
    r = run_check("implicit2", bs, topic, group, f"expect={n}", "max.poll.records=20",
                  "gc:share.auto.offset.reset=earliest")
    assert r["errors"] == [], r
    assert r["members_assigned"] == 2, r
    assert r["distinct"] == n, r
    assert r["deliveries"] == n, r  # at-least-once with no failure: every record delivered exactly once
    assert r["first_delivery_duplicates"] == 0 and r["to_both_without_redelivery"] == 0, r
    assert r["redeliveries"] == 0, r
    assert sum(r["per_consumer"]) == n and min(r["per_consumer"]) > 0, r
    assert r.get("ack_errors", []) == [], r["ack_errors"]  # every implicit acknowledgement accepted
    assert r["after"] == 0, json.dumps(r)


def test_explicit_accept_release_reject(group_broker):
    """share.acknowledgement.mode=explicit: ACCEPTed records are never redelivered; a RELEASEd record
    comes back with deliveryCount 2 (and is then ACCEPTed); REJECTed records never come back."""
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("share-exp"), 2)
    group = unique("sg-exp")
    produce(bs, topic, 2, 30)
    r = run_check("explicit", bs, topic, group, "expect=30", "idle=4000", "gc:share.auto.offset.reset=earliest")
    assert r["errors"] == [], r
    assert r["distinct"] == 30, r
    # v0, v3, ...: [1]; v1, v4, ...: [1, 2]; v2, v5, ...: [1]; anything else is listed in errors
    assert (r["accepted_once"], r["released"], r["released_then_accepted"], r["rejected"]) == (10, 10, 10, 10), r
    assert r["unexpected"] == 0, r
    assert r["after"] == 0, r


@pytest.mark.parametrize("limit, how", [(5, "broker default"), (3, "kafka-configs"), (2, "admin")])
def test_delivery_count_limit_archives_always_released_records(group_broker, limit, how):
    """A record RELEASEd on every delivery is delivered exactly share.delivery.count.limit times (the
    broker's group.share.delivery.count.limit, 5, or the GROUP config), with counts 1..limit, then
    archived: a later consumer of the group gets nothing."""
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("share-lim"), 1)
    group = unique("sg-lim")
    produce(bs, topic, 1, 4)
    extra = ["gc:share.auto.offset.reset=earliest"]
    if how == "kafka-configs":
        out = lab.run_tool("kafka-configs", ["--bootstrap-server", bs, "--alter", "--entity-type", "groups",
                                             "--entity-name", group, "--add-config",
                                             f"share.delivery.count.limit={limit},share.auto.offset.reset=earliest"])
        assert out.returncode == 0, out.stdout + out.stderr
        out = lab.run_tool("kafka-configs", ["--bootstrap-server", bs, "--describe", "--entity-type", "groups",
                                             "--entity-name", group])
        assert out.returncode == 0 and f"share.delivery.count.limit={limit}" in out.stdout, out.stdout + out.stderr
        extra = []
    elif how == "admin":
        extra.append(f"gc:share.delivery.count.limit={limit}")
    r = run_check("limit", bs, topic, group, "idle=4000", *extra)
    assert r["errors"] == [], r
    assert r["distinct"] == 4, r
    assert r["deliveries"] == [limit], r
    assert r["count_sequences"] == [list(range(1, limit + 1))], r
    assert r["after"] == 0, r


class Holder:
    """JavaShareConsumerCheck `hold` in its own process: acquires records, never acknowledges them."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.proc = subprocess.Popen(java_cmd("hold", bootstrap, topic, group, "max.poll.records=5",
                                              "gc:share.auto.offset.reset=earliest",
                                              f"gc:share.record.lock.duration.ms={LOCK_MS}"),
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.acquired: dict | None = None
        self._got = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("ACQUIRED "):
                self.acquired = json.loads(line[len("ACQUIRED "):])
                self._got.set()

    def wait_acquired(self, timeout: float = 60) -> dict:
        assert self._got.wait(timeout), f"the holder acquired nothing (exit {self.proc.poll()})"
        assert self.acquired is not None
        return self.acquired

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.mark.serial  # a timing bound (the acquisition lock's duration)
@pytest.mark.parametrize("how", ["kill -9", "frozen"])
def test_acquired_records_go_to_another_consumer_when_the_holder_dies(group_broker, how):
    """A consumer acquires records (share.record.lock.duration.ms=15000, the GROUP config at Kafka's
    minimum) and never acknowledges them. kill -9: another consumer gets them with deliveryCount 2, at
    the latest when the lock expires (Apache Kafka releases them at once when the connection drops).
    frozen (SIGSTOP, connection kept open): they come back only once the lock has expired; the records
    never acquired are delivered at once."""
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("share-lock"), 1)
    group = unique("sg-lock")
    produce(bs, topic, 1, 20)
    holder = Holder(bs, topic, group)
    try:
        acq = holder.wait_acquired()
        held = set(acq["values"])
        assert held and held <= values(20), acq
        assert acq["lock_ms"] == LOCK_MS, acq  # ShareFetch's AcquisitionLockTimeoutMs
        holder.signal(signal.SIGKILL if how == "kill -9" else signal.SIGSTOP)
        r = run_check("consume", bs, topic, group, "expect=20", "tail=1000", "deadline=60000")
    finally:
        holder.kill()
    assert set(r["counts"]) == values(20), r
    assert {v: c for v, c in r["counts"].items() if v in held} == {v: [2] for v in held}, r
    assert {v: c for v, c in r["counts"].items() if v not in held} == {v: [1] for v in values(20) - held}, r
    since = {v: r["first_at_ms"][v] - acq["at_ms"] for v in held}
    assert max(since.values()) <= LOCK_MS + 10000, since
    if how == "frozen":
        assert min(since.values()) >= LOCK_MS - 1000, since  # not before the lock expired
        others = [r["first_at_ms"][v] - acq["at_ms"] for v in values(20) - held]
        assert max(others) < LOCK_MS - 1000, others  # the free records did not wait for the lock


def test_share_auto_offset_reset_earliest_vs_latest(group_broker):
    """share.auto.offset.reset=latest (GROUP config): a member that joins after 10 records were written
    gets only the 7 produced once it was assigned; earliest: a new group gets all 17."""
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("share-reset"), 2)
    produce(bs, topic, 2, 10)
    late = run_check("latest", bs, topic, unique("sg-latest"), "produce=7", "gc:share.auto.offset.reset=latest")
    assert late["assigned"] is True, late
    assert (late["old"], late["new"], late["deliveries"]) == (0, 7, 7), late
    early = run_check("consume", bs, topic, unique("sg-earliest"), "expect=17", "tail=2000",
                      "gc:share.auto.offset.reset=earliest")
    assert set(early["counts"]) == values(10) | {f"new-{i}" for i in range(7)}, early
    assert early["deliveries"] == 17, early


def test_share_isolation_read_committed_skips_aborted_and_open_transactions(group_broker):
    """share.isolation.level=read_committed (GROUP config): committed transactional records only, none of
    an aborted transaction nor of one still open; read_uncommitted (the default) delivers all of them."""
    from confluent_kafka import Producer

    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("share-txn"), 2)
    p = Producer({"bootstrap.servers": bs, "transactional.id": unique("share-txn")})
    p.init_transactions(30)
    for prefix, commit in (("c", True), ("a", False), ("d", True), ("o", None)):
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, value=f"{prefix}{i}".encode(), partition=i % 2)
        p.flush(30)
        if commit is True:
            p.commit_transaction(30)
        elif commit is False:
            p.abort_transaction(30)
    # o0..o9: the transaction is still open while both groups read
    try:
        rc = run_check("consume", bs, topic, unique("sg-rc"), "idle=4000", "gc:share.auto.offset.reset=earliest",
                       "gc:share.isolation.level=read_committed")
        ru = run_check("consume", bs, topic, unique("sg-ru"), "idle=4000", "gc:share.auto.offset.reset=earliest",
                       "gc:share.isolation.level=read_uncommitted")
    finally:
        p.abort_transaction(30)
    committed = {f"{x}{i}" for x in "cd" for i in range(10)}
    assert set(rc["counts"]) == committed and rc["deliveries"] == 20, rc
    assert set(ru["counts"]) == committed | {f"{x}{i}" for x in "ao" for i in range(10)} and ru["deliveries"] == 40, ru
