"""Exactly-once consume-transform-produce (KIP-98 / KIP-447) with confluent-kafka: a worker that dies
before a commit leaves neither output nor offsets behind; a new instance with the same transactional id
fences any older one (whose commit then fails fatally) and resumes from the committed offsets, so the
output is the transformed input exactly once. Black-box: also runs with --broker=kafka."""
from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaException, Producer

from tests.conftest import ROOT
from tests.integration.transactions import txn_worker
from tests.support.txn_helpers import consume_to_end, create_topics, txn_producer

N = 300
PARTS = 3


def uid() -> str:
    return uuid.uuid4().hex[:8]


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in txn_worker.committed_offsets(c, topic, PARTS)}
    finally:
        c.close()


def test_consume_transform_produce_survives_crash_and_zombie(shared_broker):
    b = shared_broker.bootstrap
    src, dst, group, txn_id = f"eos-in-{uid()}", f"eos-out-{uid()}", f"eos-g-{uid()}", f"eos-{uid()}"
    create_topics(b, {src: PARTS, dst: PARTS})
    p = Producer({"bootstrap.servers": b, "linger.ms": 5})
    inputs = [f"rec-{i:04d}".encode() for i in range(N)]
    for i, v in enumerate(inputs):
        p.produce(src, key=b"k%d" % i, value=v, partition=i % PARTS)
    p.flush(30)

    # 1. a worker commits two batches, then dies with the third one sent but not committed
    proc = subprocess.run([sys.executable, "-m", "tests.integration.transactions.txn_worker", b, src, dst, group, txn_id,
                           "--batch", "50", "--crash-after", "2"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    committed_out = consume_to_end(b, dst, list(range(PARTS)))
    done = sum(len(v) for v in committed_out.values())
    assert 0 < done < N
    dirty = consume_to_end(b, dst, list(range(PARTS)), isolation="read_uncommitted")
    assert sum(len(v) for v in dirty.values()) > done  # the dead worker's records are in the log

    # 2. a zombie instance with the same id (it fences the dead one) is fenced by the next instance
    zombie = txn_producer(b, txn_id)
    # the dead worker's transaction is aborted now: its offsets were never committed (until then the
    # group's offsets are unstable and committed() with require_stable waits)
    offsets = group_offsets(b, group, src)
    assert sum(max(o, 0) for o in offsets.values()) == done  # offsets moved exactly with the output
    zombie.begin_transaction()
    zombie.produce(dst, value=b"zombie", partition=0)
    zombie.flush(30)
    assert txn_worker.run(b, src, dst, PARTS, group, txn_id, batch=50) == N - done
    with pytest.raises(KafkaException) as err:
        zombie.commit_transaction(30)
    assert err.value.args[0].fatal(), err.value.args[0]
    del zombie, err

    # 3. the output is the transformed input, exactly once
    out = consume_to_end(b, dst, list(range(PARTS)))
    got = [v for part in out.values() for _o, v in part]
    assert sorted(got) == sorted(txn_worker.transform(v) for v in inputs)
    for part in range(PARTS):  # and in input order per partition
        expected = [txn_worker.transform(v) for i, v in enumerate(inputs) if i % PARTS == part]
        assert [v for _o, v in out[part]] == expected
    assert group_offsets(b, group, src) == {part: N // PARTS for part in range(PARTS)}
