"""A producer that opens a transaction and dies pins the LSO only until its transaction.timeout.ms:
the coordinator then aborts it with a bumped epoch (the dead producer is fenced) and read_committed
consumers move on. Black-box (--broker=kafka too: Kafka checks timeouts every 10 s by default; this
minikafka is started with a 200 ms check interval)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from tests.conftest import ROOT, _other_broker, broker_kind
from tests.support.helpers import RawClient, wait_until
from tests.support.txn_helpers import (
    INVALID_PRODUCER_EPOCH,
    consume_to_end,
    create_topics,
    describe_transactions,
    find_txn_coordinator,
    list_offset_isolated,
    produce_txn,
    txn_batch,
    txn_producer,
)

DIE_IN_TRANSACTION = textwrap.dedent("""
    import os, sys
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                  "transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(sys.argv[3], value=b"doomed", partition=0)
    p.flush(30)
    os._exit(0)
""")


@pytest.fixture
def reaper_broker(request):
    if broker_kind(request.config) != "minikafka":
        return _other_broker(request)
    return request.getfixturevalue("broker_factory")(
        {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})


def test_dead_producer_transaction_times_out(reaper_broker):
    b = reaper_broker.bootstrap
    topic, txn_id = f"txn-timeout-{uuid.uuid4().hex[:8]}", f"dies-{uuid.uuid4().hex[:8]}"
    create_topics(b, {topic: 1})
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", DIE_IN_TRANSACTION, b, txn_id, topic], cwd=ROOT, check=True, timeout=60)
    survivor = txn_producer(b, f"survivor-{uuid.uuid4().hex[:8]}")
    survivor.begin_transaction()
    survivor.produce(topic, value=b"later", partition=0)
    survivor.commit_transaction(30)
    with RawClient(b) as c:
        assert find_txn_coordinator(c, txn_id).error_code == 0
        (desc,) = describe_transactions(c, [txn_id])
        pid, epoch = desc.producer_id, desc.producer_epoch
        if time.monotonic() - t0 < 1.5:  # still inside its 2 s timeout: the LSO is held at the doomed record
            assert desc.transaction_state == "Ongoing"
            assert list_offset_isolated(c, topic, 0, 1) == 0
        wait_until(lambda: list_offset_isolated(c, topic, 0, 1) == list_offset_isolated(c, topic, 0, 0),
                   timeout=30, interval=0.1, what="the timed-out transaction to be aborted")
        wait_until(lambda: describe_transactions(c, [txn_id])[0].transaction_state == "CompleteAbort", timeout=10)
        (desc,) = describe_transactions(c, [txn_id])
        assert (desc.producer_id, desc.producer_epoch) == (pid, epoch + 1)  # the abort fenced the dead producer
        zombie = produce_txn(c, txn_id, topic, 0, txn_batch(pid, epoch, 1, [b"zombie"]))
        assert zombie.error_code == INVALID_PRODUCER_EPOCH
    assert [v for _o, v in consume_to_end(b, topic, [0])[0]] == [b"later"]
