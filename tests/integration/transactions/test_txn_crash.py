"""The broker dies (kill -9, or the test-only crash point `minikafka.test.crash.point` that exits with
137 at a given step of EndTxn) in the middle of the transaction protocol and restarts on its data:
every transaction then ends committed or aborted as the protocol says, never half, and the
coordinator state and the LSO are checked directly."""
from __future__ import annotations

import uuid

import pytest

from minikafka.coordinator.txn.log import decode_key, decode_value, iter_records
from minikafka.protocol.record_batch import iter_headers
from tests.support.helpers import RawClient, wait_until
from tests.support.txn_helpers import (
    add_partitions,
    consume_to_end,
    create_topics,
    describe_transactions,
    end_txn,
    find_txn_coordinator,
    init_producer_id,
    list_offset_isolated,
    produce_txn,
    txn_batch,
)

pytestmark = pytest.mark.minikafka_only

CRASH = "minikafka.test.crash.point"
TOPIC = "crash"


def open_txn(b: str, values: dict[int, list[bytes]]) -> tuple[str, int, int]:
    """A raw transactional producer writes `values` per partition of TOPIC and leaves the txn open."""
    tid = f"crash-{uuid.uuid4().hex[:8]}"
    with RawClient(b) as c:
        assert find_txn_coordinator(c, tid).error_code == 0
        r = init_producer_id(c, tid, 60000)
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch
        assert set(add_partitions(c, tid, pid, epoch, {TOPIC: sorted(values)}).values()) == {0}
        for part, vals in values.items():
            if vals:
                assert produce_txn(c, tid, TOPIC, part, txn_batch(pid, epoch, 0, vals)).error_code == 0
    return tid, pid, epoch


def described(b: str, tid: str):
    with RawClient(b) as c:
        (d,) = describe_transactions(c, [tid])
        return d


def wait_state(b: str, tid: str, state: str):
    wait_until(lambda: described(b, tid).error_code == 0 and described(b, tid).transaction_state == state,
               timeout=20, what=f"{tid} in {state}")
    return described(b, tid)


def lso_and_hw(b: str, part: int) -> tuple[int, int]:
    with RawClient(b) as c:
        return list_offset_isolated(c, TOPIC, part, 1), list_offset_isolated(c, TOPIC, part, 0)


def txn_log_states(data_dir, tid: str) -> list[str]:
    """The states written for `tid` to __transaction_state, read from the segment files."""
    out = []
    for path in sorted(data_dir.glob("__transaction_state-*/*.log")):
        data = path.read_bytes()
        for pos, header in iter_headers(data):
            for _o, key, value in iter_records(data[pos:pos + header.size]):
                if decode_key(key) == tid and value is not None:
                    out.append(decode_value(value).state.kafka_name)
    return out


@pytest.fixture
def make(broker_factory):
    def start(crash_point: str | None = None):
        b = broker_factory({CRASH: crash_point} if crash_point else {})
        create_topics(b.bootstrap, {TOPIC: 3})
        return b
    return start


def restart(b):
    b.overrides.pop(CRASH, None)
    if b.alive():
        b.kill()
    return b.start()


def test_kill_after_add_partitions(make):
    b = make()
    tid, pid, epoch = open_txn(b.bootstrap, {0: [], 1: []})
    b.kill()
    restart(b)
    d = wait_state(b.bootstrap, tid, "Ongoing")
    assert [(t.topic, sorted(t.partitions)) for t in d.topics] == [(TOPIC, [0, 1])]
    with RawClient(b.bootstrap) as c:  # the restarted coordinator carries on with the transaction
        assert produce_txn(c, tid, TOPIC, 1, txn_batch(pid, epoch, 0, [b"after-restart"])).error_code == 0
        assert end_txn(c, tid, pid, epoch, True) == 0
    assert consume_to_end(b.bootstrap, TOPIC, [1])[1][0][1] == b"after-restart"
    assert b.log_text().count("Traceback") == 0


def test_kill_after_produce_keeps_the_lso_then_abort(make):
    b = make()
    tid, pid, epoch = open_txn(b.bootstrap, {0: [b"t0", b"t1", b"t2"], 1: [b"u0"]})
    from confluent_kafka import Producer
    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(TOPIC, value=b"plain", partition=0)
    plain.flush(10)
    assert lso_and_hw(b.bootstrap, 0) == (0, 4)
    b.kill()
    restart(b)
    assert lso_and_hw(b.bootstrap, 0) == (0, 4)  # the open transaction still pins the LSO
    assert lso_and_hw(b.bootstrap, 1) == (0, 1)
    wait_state(b.bootstrap, tid, "Ongoing")
    with RawClient(b.bootstrap) as c:
        assert end_txn(c, tid, pid, epoch, False) == 0
    assert lso_and_hw(b.bootstrap, 0) == (5, 5)
    got = consume_to_end(b.bootstrap, TOPIC, [0, 1])
    assert [v for _o, v in got[0]] == [b"plain"] and got[1] == []


@pytest.mark.parametrize("point,commit", [("after_prepare_commit", True), ("after_prepare_abort", False),
                                          ("after_first_marker", True), ("after_markers", True),
                                          ("after_markers", False)])
def test_crash_during_end_txn_is_completed_on_restart(make, point, commit):
    b = make(point)
    values = {0: [b"a0", b"a1"], 1: [b"b0"], 2: [b"c0", b"c1", b"c2"]}
    tid, pid, epoch = open_txn(b.bootstrap, values)
    with RawClient(b.bootstrap) as c:
        with pytest.raises(ConnectionError):
            end_txn(c, tid, pid, epoch, commit)
    b.proc.wait(10)
    assert b.proc.returncode == 137
    prepared = "PrepareCommit" if commit else "PrepareAbort"
    assert txn_log_states(b.data_dir, tid)[-1] == prepared  # the crash left it prepared
    restart(b)
    d = wait_state(b.bootstrap, tid, "CompleteCommit" if commit else "CompleteAbort")
    assert (d.producer_id, d.producer_epoch, d.topics) == (pid, epoch, [])
    assert txn_log_states(b.data_dir, tid)[-2:] == [prepared, d.transaction_state]
    for part in values:  # nothing is left open: every partition's LSO is its high watermark
        lso, hw = lso_and_hw(b.bootstrap, part)
        assert lso == hw
    got = consume_to_end(b.bootstrap, TOPIC, sorted(values))
    assert {p: [v for _o, v in got[p]] for p in values} == (values if commit else {p: [] for p in values})
    with RawClient(b.bootstrap) as c:  # the client's retry of EndTxn gets the outcome it asked for
        assert end_txn(c, tid, pid, epoch, commit, retry_concurrent=True) == 0
        assert end_txn(c, tid, pid, epoch, not commit) == 48
