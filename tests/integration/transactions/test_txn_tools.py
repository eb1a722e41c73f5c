"""Hanging-transaction tools (KIP-664): `minikafka transactions list|describe|abort` and
`minikafka producers describe`, Kafka's own kafka-transactions.sh against minikafka, and Kafka's
DumpLogSegments reading the transaction files minikafka writes (.txnindex, markers, __transaction_state)."""
from __future__ import annotations

import subprocess
import uuid

import pytest

from minikafka.testing import minikafka_command, subprocess_env
from tests.conftest import ROOT
from tests.support.helpers import RawClient
from tests.integration.clients.test_reference_lab import tool
from tests.support.txn_helpers import (
    add_partitions,
    consume_to_end,
    create_topics,
    end_txn,
    find_txn_coordinator,
    init_producer_id,
    list_offset_isolated,
    produce_txn,
    txn_batch,
)


def uid() -> str:
    return uuid.uuid4().hex[:8]


def hanging_txn(b: str, topic: str, partition: int = 0) -> tuple[str, int, int, int]:
    """A transaction left open on `topic`-`partition` after one plain record: (id, pid, epoch, first offset)."""
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": b})
    plain.produce(topic, value=b"plain-before", partition=partition)
    plain.flush(10)
    tid = f"hang-{uid()}"
    with RawClient(b) as c:
        assert find_txn_coordinator(c, tid).error_code == 0
        r = init_producer_id(c, tid, 600000)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, tid, pid, epoch, {topic: [partition]}) == {(topic, partition): 0}
        p = produce_txn(c, tid, topic, partition, txn_batch(pid, epoch, 0, [b"hanging-0", b"hanging-1"]))
        assert p.error_code == 0
    plain.produce(topic, value=b"plain-after", partition=partition)
    plain.flush(10)
    return tid, pid, epoch, p.base_offset


def cli(*args: str) -> str:
    res = subprocess.run([*minikafka_command(), *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env=subprocess_env())
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.strip().splitlines()]


def test_minikafka_cli_finds_and_aborts_a_hanging_transaction(shared_broker):
    b = shared_broker.bootstrap
    topic = f"txn-cli-{uid()}"
    create_topics(b, {topic: 1})
    tid, pid, epoch, first = hanging_txn(b, topic)
    listed = rows(cli("transactions", "list", "--bootstrap-server", b))
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [tid, "1", str(pid), "Ongoing"] in listed[1:]
    described = rows(cli("transactions", "describe", "--transactional-id", tid, "--bootstrap-server", b))
    assert described[0][:5] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState"]
    assert described[1][1:5] == [tid, str(pid), str(epoch), "Ongoing"] and described[1][-1] == f"{topic}-0"
    producers = rows(cli("producers", "describe", topic, "0", "--bootstrap-server", b))
    mine = [r for r in producers[1:] if r[0] == str(pid)]
    assert mine and mine[0][1] == str(epoch) and mine[0][-1] == str(first)
    with RawClient(b) as c:
        assert list_offset_isolated(c, topic, 0, 1) == first  # the hanging transaction pins the LSO
    out = cli("transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", str(first),
              "--bootstrap-server", b)
    assert f"producer {pid}" in out
    with RawClient(b) as c:
        assert list_offset_isolated(c, topic, 0, 1) == list_offset_isolated(c, topic, 0, 0)
    assert [v for _o, v in consume_to_end(b, topic, [0])[0]] == [b"plain-before", b"plain-after"]
    with RawClient(b) as c:  # the coordinator still has it open; its own abort is then a no-op marker
        assert end_txn(c, tid, pid, epoch, False) == 0


def test_kafka_transactions_tool_against_minikafka(shared_broker):
    b = shared_broker.bootstrap
    topic = f"txn-kt-{uid()}"
    create_topics(b, {topic: 1})
    tid, pid, epoch, first = hanging_txn(b, topic)
    res, out = tool("kafka-transactions", "--bootstrap-server", b, "list")
    assert any(line.split()[:1] == [tid] and "Ongoing" in line for line in res.stdout.splitlines()), out
    res, out = tool("kafka-transactions", "--bootstrap-server", b, "describe-producers", "--topic", topic,
                    "--partition", "0")
    assert any(line.split()[:2] == [str(pid), str(epoch)] and line.split()[-1] == str(first)
               for line in res.stdout.splitlines()), out
    res, out = tool("kafka-transactions", "--bootstrap-server", b, "abort", "--topic", topic, "--partition", "0",
                    "--start-offset", str(first))
    with RawClient(b) as c:
        assert list_offset_isolated(c, topic, 0, 1) == list_offset_isolated(c, topic, 0, 0), out


@pytest.mark.minikafka_only  # reads minikafka's files
def test_dump_log_reads_transaction_files(broker):
    from tests.support.txn_helpers import txn_producer

    b = broker.bootstrap
    topic = f"txn-dump-{uid()}"
    create_topics(b, {topic: 1})
    p = txn_producer(b, f"dump-{uid()}")
    p.begin_transaction()
    p.produce(topic, value=b"committed", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"aborted", partition=0)
    p.flush(10)
    p.abort_transaction(30)
    broker.stop()
    part = broker.data_dir / f"{topic}-0"
    res, out = tool("kafka-dump-log", "--files", str(part / "00000000000000000000.log"), "--print-data-log")
    assert "endTxnMarker: COMMIT coordinatorEpoch: 0" in res.stdout and "endTxnMarker: ABORT" in res.stdout, out
    assert "isTransactional: true isControl: true" in res.stdout, out
    res, out = tool("kafka-dump-log", "--files", str(part / "00000000000000000000.txnindex"))
    assert "version: 0 producerId: 0 firstOffset: 2 lastOffset: 3 lastStableOffset: 4" in res.stdout, out
    state_logs = sorted(broker.data_dir.glob("__transaction_state-*/00000000000000000000.log"),
                        key=lambda f: f.stat().st_size)
    res, out = tool("kafka-dump-log", "--files", str(state_logs[-1]), "--transaction-log-decoder")
    for status in (0, 1, 2, 4, 3, 5):  # Empty, Ongoing, PrepareCommit, CompleteCommit, PrepareAbort, CompleteAbort
        assert f'"transactionStatus":{status}' in res.stdout, out
