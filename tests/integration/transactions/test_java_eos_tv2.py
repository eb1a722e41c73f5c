"""Exactly-once consume-transform-produce with the Java 4.x client (kafka-clients 4.3.1), which runs
transactions with transaction.version 2 when the broker finalizes it (EndTxn v5, Produce v12,
TxnOffsetCommit v5): a first run is halted with a transaction open, a second run with the same
transactional id fences it and finishes; the output holds every input exactly once, and the producer
epoch shows one bump per transaction (TV2) rather than one per InitProducerId (TV1). The same across
a broker kill -9 in the middle of ending a TV2 transaction (minikafka only: a test crash point)."""
from __future__ import annotations

import subprocess
import uuid

import pytest

from tests.conftest import ROOT
from tests.integration.clients.test_java_client import classpath, lab
from tests.support.txn_helpers import consume_to_end, create_topics, describe_transactions, find_txn_coordinator
from tests.support.helpers import RawClient
from tests.integration.admin.test_features import set_tv

PROGRAM = ROOT / "tests" / "java" / "JavaEosCheck.java"
N = 200
CRASH_AFTER = 90


def run(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([lab.java_bin(), "-Xmx256m", "-cp", classpath("4.x"), str(PROGRAM), bootstrap, *args],
                          capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("level", [2, 1])
def test_java_consume_transform_produce_exactly_once_across_a_producer_kill(shared_broker, level):
    """With transaction.version 1 finalized the same client runs TV1 transactions (no epoch bumps)."""
    b = shared_broker.bootstrap
    if level != 2:
        set_tv(b, level)
    try:
        check_producer_kill(b, level)
    finally:
        if level != 2:
            set_tv(b, 2)


def check_producer_kill(b: str, level: int) -> None:
    from confluent_kafka import Producer
    tag = uuid.uuid4().hex[:6]
    src, out, group, tid = f"eos-in-{tag}", f"eos-out-{tag}", f"eos-g-{tag}", f"eos-{tag}"
    create_topics(b, {src: 2, out: 2})
    p = Producer({"bootstrap.servers": b})
    for i in range(N):
        p.produce(src, value=f"v{i:04d}".encode(), partition=i % 2)
    p.flush(30)
    lab.fetch()
    first = run(b, src, out, group, tid, f"crash:{CRASH_AFTER}")
    assert first.returncode == 3, first.stdout[-2000:] + first.stderr[-3000:]
    second = run(b, src, out, group, tid, "run")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    summary = second.stdout.strip().splitlines()[-1]
    transactions = int(summary.split()[0].split("=")[1])
    assert transactions >= 3, summary
    got = consume_to_end(b, out, [0, 1])
    outputs = sorted(v.decode() for part in got.values() for _o, v in part)
    assert outputs == sorted(f"out-v{i:04d}" for i in range(N))  # each input once: nothing lost, nothing twice
    with RawClient(b) as c:
        find_txn_coordinator(c, tid)
        (d,) = describe_transactions(c, [tid])
    assert d.transaction_state == "CompleteCommit"
    if level >= 2:
        assert d.producer_epoch > transactions, d  # TV2: every commit bumped the epoch
    else:
        assert d.producer_epoch <= 2, d  # TV1: InitProducerId, the fence of the halted run, InitProducerId


@pytest.mark.minikafka_only
def test_java_tv2_exactly_once_across_a_broker_kill(broker_factory):
    """The broker dies (kill -9 at the test crash point: PrepareCommit and one marker written) while the
    Java producer commits its first TV2 transaction; the producer is killed too. After a restart the
    coordinator completes that commit; a new run with the same transactional id finishes the input:
    every input exactly once in the output."""
    from confluent_kafka import Producer
    b = broker_factory({"minikafka.test.crash.point": "after_first_marker"})
    tag = uuid.uuid4().hex[:6]
    src, out, group, tid = f"eosk-in-{tag}", f"eosk-out-{tag}", f"eosk-g-{tag}", f"eosk-{tag}"
    create_topics(b.bootstrap, {src: 2, out: 2})
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(N):
        p.produce(src, value=f"v{i:04d}".encode(), partition=i % 2)
    p.flush(30)
    lab.fetch()
    java = subprocess.Popen([lab.java_bin(), "-Xmx256m", "-cp", classpath("4.x"), str(PROGRAM), b.bootstrap, src,
                             out, group, tid, "run"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert b.proc.wait(120) == 137
    finally:
        java.kill()
        java.wait(30)
    b.kill()
    b.overrides.pop("minikafka.test.crash.point")
    b.start()
    second = run(b.bootstrap, src, out, group, tid, "run")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    got = consume_to_end(b.bootstrap, out, [0, 1])
    outputs = sorted(v.decode() for part in got.values() for _o, v in part)
    assert outputs == sorted(f"out-v{i:04d}" for i in range(N))
