"""coordinator/txn/state.py (the transaction state machine) and coordinator/txn/log.py (records of
__transaction_state, checked against bytes written by Apache Kafka 4.3.1)."""
from __future__ import annotations

import itertools

import pytest

from minikafka.coordinator.txn.log import (
    decode_key,
    decode_value,
    encode_batch,
    encode_key,
    encode_value,
    iter_records,
)
from minikafka.coordinator.txn.state import (
    IllegalTxnTransition,
    TxnMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)

S = TxnState

# Kafka 4.3's TransactionState.validPreviousStates (TV2 aborts also start from Empty/Complete*)
KAFKA_VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_states_ids_names_and_valid_previous_match_kafka():
    assert [s.value for s in S] == list(range(8))
    assert [s.kafka_name for s in S] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                         "CompleteAbort", "Dead", "PrepareEpochFence"]
    for state, previous in KAFKA_VALID_PREVIOUS.items():
        assert state.valid_previous == previous
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.from_name("Ongoing") is S.ONGOING and S.from_name("ongoing") is None


def meta(state: TxnState = S.EMPTY, epoch: int = 0) -> TxnMetadata:
    m = TxnMetadata("t", 7, epoch, 60000, state, update_ms=1)
    if state not in (S.EMPTY,):
        m.start_ms = 1
    if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT):
        m.partitions = {("a", 0)}
    return m


def test_commit_lifecycle():
    m = meta()
    t = m.prepare_add_partitions({("a", 0), ("b", 1)}, 100)
    assert m.pending_state is S.ONGOING and m.state is S.EMPTY
    m.complete_transition(t)
    assert m.state is S.ONGOING and m.start_ms == 100 and m.partitions == {("a", 0), ("b", 1)}
    m.complete_transition(m.prepare_add_partitions({("c", 0)}, 150))
    assert m.start_ms == 100 and len(m.partitions) == 3
    m.complete_transition(m.prepare_abort_or_commit(S.PREPARE_COMMIT, 200))
    assert m.state is S.PREPARE_COMMIT and len(m.partitions) == 3
    m.complete_transition(m.prepare_complete(300))
    assert m.state is S.COMPLETE_COMMIT and m.partitions == set() and m.update_ms == 300


def test_every_illegal_transition_raises():
    preparers = {
        S.ONGOING: lambda m: m.prepare_add_partitions({("x", 0)}, 5),
        S.PREPARE_COMMIT: lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 5),
        S.PREPARE_ABORT: lambda m: m.prepare_abort_or_commit(S.PREPARE_ABORT, 5),
        S.DEAD: lambda m: m.prepare_dead(),
        S.PREPARE_EPOCH_FENCE: lambda m: m.prepare_fence_epoch(),
        S.EMPTY: lambda m: m.prepare_increment_epoch(60000, None, 5),
    }
    for current, (target, prepare) in itertools.product(S, preparers.items()):
        m = meta(current)
        if current in target.valid_previous:
            prepare(m)
            assert m.pending_state is target
        else:
            with pytest.raises(IllegalTxnTransition):
                prepare(m)
            assert m.pending_state is None


def test_one_pending_transition_at_a_time_and_abort():
    m = meta()
    m.prepare_add_partitions({("a", 0)}, 1)
    with pytest.raises(IllegalTxnTransition):
        m.prepare_add_partitions({("b", 0)}, 1)
    m.abort_transition()
    assert m.state is S.EMPTY and m.pending_state is None


def test_complete_must_match_the_pending_state():
    m = meta(S.ONGOING)
    t = m.prepare_abort_or_commit(S.PREPARE_ABORT, 5)
    wrong = TxnTransit(t.producer_id, t.last_producer_id, t.producer_epoch, t.last_producer_epoch, t.timeout_ms,
                       S.PREPARE_COMMIT, t.partitions, t.start_ms, t.update_ms)
    with pytest.raises(IllegalTxnTransition):
        m.complete_transition(wrong)
    bad_epoch = TxnTransit(t.producer_id, t.last_producer_id, t.producer_epoch + 3, t.last_producer_epoch,
                           t.timeout_ms, t.state, t.partitions, t.start_ms, t.update_ms)
    with pytest.raises(IllegalTxnTransition):
        m.complete_transition(bad_epoch)


def test_init_producer_id_epoch_rules():
    m = meta(S.COMPLETE_COMMIT, epoch=4)
    t = m.prepare_increment_epoch(1000, None, 9)
    assert (t.producer_epoch, t.last_producer_epoch, t.state, t.start_ms) == (5, -1, S.EMPTY, -1)
    m.complete_transition(t)
    assert m.timeout_ms == 1000
    # KIP-360: resuming with the current epoch bumps and remembers it; a retry of that bump is idempotent
    t = m.prepare_increment_epoch(1000, 5, 10)
    m.complete_transition(t)
    assert (m.producer_epoch, m.last_producer_epoch) == (6, 5)
    t = m.prepare_increment_epoch(1000, 5, 11)
    assert t.producer_epoch == 6
    m.abort_transition()
    assert m.prepare_increment_epoch(1000, 2, 12) is None  # fenced
    assert is_epoch_exhausted(32766) and not is_epoch_exhausted(32765)


def test_fence_bumps_epoch_and_rotation_resets_it():
    m = meta(S.ONGOING, epoch=3)
    assert m.prepare_fence_epoch().producer_epoch == 4
    m.abort_transition()
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_epoch().producer_epoch == 3
    done = meta(S.COMPLETE_ABORT, epoch=32766)
    t = done.prepare_producer_id_rotation(99, 500, 5, record_last_epoch=True)
    done.complete_transition(t)
    assert (done.producer_id, done.producer_epoch, done.last_producer_epoch) == (99, 0, 32766)


# ------------------------------------------------------------------------------- log records

# Written by Apache Kafka 4.3.1 (single node) for transactional id "tx-bcc58b": key, then values
KAFKA_KEY = bytes.fromhex("0000000974782d626363353862")
KAFKA_EMPTY = bytes.fromhex("0001000000000000000100000000ea600000000001a202035722ffffffffffffffff0100080000000000000001")
KAFKA_ONGOING = bytes.fromhex(
    "0001000000000000000100000000ea6001020d70726f62652d313361356663020000000000000001a202035729000001a2020357290100"
    "080000000000000001")
KAFKA_COMPLETE = bytes.fromhex(
    "0001000000000000000100020000ea600401000001a2020357f8000001a2020357db0100080000000000000001")
KAFKA_TWO_PARTITIONS_WITH_CTV = bytes.fromhex(  # also carries ClientTransactionVersion (tag 2)
    "0001000000000000000600000000ea6001020d70726f62652d36356161333403000000000000000200000001a2020a06f9000001a2020a"
    "06f0020008000000000000000602020002")


def test_key_matches_kafka():
    assert encode_key("tx-bcc58b") == KAFKA_KEY
    assert decode_key(KAFKA_KEY) == "tx-bcc58b"
    assert decode_key(b"\x00\x01\x00\x01x") is None  # another record type


@pytest.mark.parametrize("data,state,partitions", [
    (KAFKA_EMPTY, S.EMPTY, set()),
    (KAFKA_ONGOING, S.ONGOING, {("probe-13a5fc", 0)}),
    (KAFKA_COMPLETE, S.COMPLETE_COMMIT, set()),
])
def test_values_decode_and_reencode_byte_identical(data, state, partitions):
    t = decode_value(data)
    assert t.state is state and set(t.partitions) == partitions
    assert t.producer_id == 1 and t.timeout_ms == 60000 and t.last_producer_id == 1
    assert encode_value(t) == data


def test_value_with_unknown_tags_and_v0():
    t = decode_value(KAFKA_TWO_PARTITIONS_WITH_CTV)
    assert t.partitions == {("probe-65aa34", 0), ("probe-65aa34", 2)} and t.producer_id == 6
    v0 = encode_value(t, version=0)
    assert decode_value(v0) == TxnTransit(6, -1, 0, -1, 60000, S.ONGOING, t.partitions, t.start_ms, t.update_ms)


def test_batch_roundtrip_with_tombstone():
    batch = encode_batch([(encode_key("a"), encode_value(meta().snapshot())), (encode_key("b"), None)], 123)
    recs = list(iter_records(batch))
    assert [(o, decode_key(k)) for o, k, _ in recs] == [(0, "a"), (1, "b")]
    assert recs[1][2] is None and decode_value(recs[0][2]).state is S.EMPTY
