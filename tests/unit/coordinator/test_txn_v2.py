"""Transaction version 2 (KIP-890 part 2) in the coordinator and the partitions, on real partition logs
with a fake clock: the epoch bump of every EndTxn v5 and its retries, the producer id rotation when
the epochs run out, implicit partition addition, TV2 markers and the partition-side epoch check,
the TransactionLogValue fields, and the completion of a prepared TV2 transaction after a crash."""
from __future__ import annotations

import asyncio
import dataclasses
import itertools

import pytest

from minikafka.broker.errors import error_code
from minikafka.broker.topic_catalog import TopicCatalog
from minikafka.coordinator.txn.coordinator import EndTxnResult, TransactionCoordinator, TxnConfig
from minikafka.coordinator.txn.log import decode_value, encode_value
from minikafka.coordinator.txn.state import TxnState
from minikafka.storage.errors import InvalidProducerEpochError
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.storage.producer_state import AppendOrigin, ProducerAppendInfo, ProducerStateEntry
from minikafka.storage.txn_markers import build_marker_batch
from minikafka.protocol.record_batch import parse_header

CONCURRENT, FENCED, INVALID_STATE, MAPPING = 51, 90, 48, 49


class Clock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> float:
        return self.ms / 1000


@pytest.fixture
def env(tmp_path):
    logs = LogManager([tmp_path], LogConfig())
    catalog = TopicCatalog(logs, LogConfig(), tmp_path)
    catalog.load()
    catalog.create("t", 2)
    pids = itertools.count(100)
    tv = {"level": 2}

    def make() -> TransactionCoordinator:
        return TransactionCoordinator(TxnConfig(num_partitions=4), catalog, lambda: next(pids), error_code,
                                      clock=Clock(), transaction_version=lambda: tv["level"])

    yield make, catalog, tv
    logs.close()


def marker_epochs(catalog, topic="t", partition=0) -> list[int]:
    plog = catalog.partition_log(topic, partition)
    from minikafka.protocol.record_batch import iter_headers
    data = plog.read(0, 1 << 20) or b""
    return [h.producer_epoch for _pos, h in iter_headers(data) if h.is_control]


def begin_v2(c, tid, parts=(("t", 0),)) -> tuple[int, int]:
    code, pid, epoch = c.init_producer_id(tid, 60000)
    assert code == 0
    for tp in parts:  # Produce v12+: the partition joins the transaction on the produce path
        assert c.verify_produce(tid, pid, epoch, tp, add_if_missing=True) == 0
    return pid, epoch


def test_end_txn_v5_bumps_the_epoch_and_markers_carry_it(env):
    make, catalog, _tv = env
    c = make()
    pid, epoch = begin_v2(c, "a", (("t", 0), ("t", 1)))
    assert c.txns.get("a").client_tv == 2
    assert c.end_transaction("a", pid, epoch, True, client_tv=2) == EndTxnResult(0, pid, epoch + 1)
    assert c.describe("a").state == "CompleteCommit" and c.describe("a").producer_epoch == epoch + 1
    assert marker_epochs(catalog, "t", 0) == marker_epochs(catalog, "t", 1) == [epoch + 1]
    # a retry of that EndTxn (the response was lost) gets the same answer and writes nothing
    assert c.end_transaction("a", pid, epoch, True, client_tv=2) == EndTxnResult(0, pid, epoch + 1)
    assert c.end_transaction("a", pid, epoch, False, client_tv=2).error_code == INVALID_STATE
    assert marker_epochs(catalog) == [epoch + 1]
    # the next transaction runs at the bumped epoch; a late EndTxn of the previous one is fenced
    assert c.verify_produce("a", pid, epoch + 1, ("t", 0), add_if_missing=True) == 0
    assert c.verify_produce("a", pid, epoch, ("t", 1), add_if_missing=True) == FENCED
    assert c.end_transaction("a", pid, epoch, True, client_tv=2).error_code == FENCED
    assert c.end_transaction("a", pid, epoch + 1, False, client_tv=2) == EndTxnResult(0, pid, epoch + 2)
    assert marker_epochs(catalog) == [epoch + 1, epoch + 2]


def test_abort_of_an_empty_transaction_bumps_the_epoch_commit_is_refused(env):
    make, _catalog, _tv = env
    c = make()
    _, pid, epoch = c.init_producer_id("e", 60000)
    assert c.end_transaction("e", pid, epoch, True, client_tv=2).error_code == INVALID_STATE
    assert c.end_transaction("e", pid, epoch, False, client_tv=2) == EndTxnResult(0, pid, epoch + 1)
    assert c.describe("e").state == "CompleteAbort"
    assert c.end_transaction("e", pid, epoch, False, client_tv=2) == EndTxnResult(0, pid, epoch + 1)  # retry
    assert c.end_transaction("e", pid, epoch + 1, False, client_tv=2) == EndTxnResult(0, pid, epoch + 2)


def test_exhausted_epoch_rotates_the_producer_id_at_the_end(env):
    make, catalog, _tv = env
    c = make()
    pid, _ = begin_v2(c, "x")
    meta = c.txns.get("x")
    meta.producer_epoch = 32766  # Short.MAX_VALUE - 1
    res = c.end_transaction("x", pid, 32766, True, client_tv=2)
    assert res.error_code == 0 and res.producer_id != pid and res.producer_epoch == 0
    assert marker_epochs(catalog) == [32767]  # the old producer id's last epoch ends its data
    d = c.describe("x")
    assert (d.state, d.producer_id, d.producer_epoch) == ("CompleteCommit", res.producer_id, 0)
    assert c.end_transaction("x", pid, 32766, True, client_tv=2) == res  # retry across the rotation
    assert c.end_transaction("x", pid, 32765, True, client_tv=2).error_code == MAPPING


def test_tv1_end_txn_keeps_the_epoch(env):
    make, catalog, _tv = env
    c = make()
    code, pid, epoch = c.init_producer_id("one", 60000)
    assert c.add_partitions("one", pid, epoch, {("t", 0)}) == 0
    assert c.end_transaction("one", pid, epoch, True, client_tv=0) == EndTxnResult(0)
    assert c.describe("one").producer_epoch == epoch and marker_epochs(catalog) == [epoch]


@pytest.mark.parametrize("level", [1, 2])
def test_fencing_an_open_transaction_with_either_finalized_level(env, level):
    make, catalog, tv = env
    tv["level"] = level
    c = make()
    pid, epoch = begin_v2(c, "f")
    assert c.init_producer_id("f", 60000)[0] == CONCURRENT  # aborts with a bumped epoch first
    assert marker_epochs(catalog) == [epoch + 1]
    assert c.init_producer_id("f", 60000) == (0, pid, epoch + 2)


def test_value_fields_round_trip_and_prepared_tv2_completes_after_a_crash(env):
    make, catalog, _tv = env
    c = make()
    pid, _ = begin_v2(c, "p", (("t", 0), ("t", 1)))
    meta = c.txns.get("p")
    meta.producer_epoch = 32766
    transit = meta.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 5, client_tv=2, next_producer_id=777)
    # the log does not keep the last epoch (Kafka's TransactionLogValue has no field for it)
    assert decode_value(encode_value(transit)) == dataclasses.replace(transit, last_producer_epoch=-1)
    c.txns.persist(meta, transit)  # then "crash" before any marker

    async def scenario():
        c2 = make()
        c2.start()
        await c2.txns.load_task
        await c2.stop()
        return c2

    c2 = asyncio.run(scenario())
    d = c2.describe("p")
    assert (d.state, d.producer_id, d.producer_epoch) == ("CompleteCommit", 777, 0)
    assert marker_epochs(catalog, "t", 0) == marker_epochs(catalog, "t", 1) == [32767]
    for part in (0, 1):
        plog = catalog.partition_log("t", part)
        assert plog.last_stable_offset == plog.high_watermark


def _marker_info(entry: ProducerStateEntry, epoch: int, tv: int, offset: int = 10):
    info = ProducerAppendInfo(entry.producer_id, entry, AppendOrigin.COORDINATOR)
    return info.append_end_txn_marker(epoch, 0, True, offset, 1, transaction_version=tv)


def test_tv2_markers_need_a_newer_epoch_except_an_idempotent_retry():
    open_txn = ProducerStateEntry(7, producer_epoch=3, current_txn_first_offset=5)
    assert _marker_info(open_txn, 3, tv=0) is not None  # TV1: the transaction's own epoch
    with pytest.raises(InvalidProducerEpochError, match=r"<= the last seen epoch 3 \(TV2\)"):
        _marker_info(open_txn, 3, tv=2)
    assert _marker_info(open_txn, 4, tv=2).first_offset == 5
    done = ProducerStateEntry(7, producer_epoch=4)  # marker already written: a retry passes, ends nothing
    assert _marker_info(done, 4, tv=2) is None
    with pytest.raises(InvalidProducerEpochError):
        _marker_info(done, 3, tv=2)


def test_marker_batch_header_carries_the_bumped_epoch():
    h = parse_header(build_marker_batch(5, 9, 0, True, 1))
    assert (h.producer_id, h.producer_epoch, h.is_control) == (5, 9, True)


def test_tv2_transactional_batch_must_start_at_sequence_0_without_producer_state(env):
    from minikafka.storage.errors import OutOfOrderSequenceError
    from tests.support.txn_helpers import txn_batch
    _make, catalog, _tv = env
    plog = catalog.partition_log("t", 1)
    with pytest.raises(OutOfOrderSequenceError, match="Expected sequence 0 for transactions v2"):
        plog.append(txn_batch(55, 0, 5, [b"x"]), transaction_version=2)
    plog.append(txn_batch(56, 0, 5, [b"x"]))  # TV1 / idempotent: an unknown producer may start anywhere
    plog.append(txn_batch(55, 0, 0, [b"y"]), transaction_version=2)
    plog.append(txn_batch(55, 0, 1, [b"z"]), transaction_version=2)
