"""Durability across broker restarts: SIGTERM and kill -9 in the middle of a confluent-kafka load.

Every delivery-acknowledged record must be in the log exactly once, at the offset the ack reported;
offsets stay contiguous and produce continues at the next offset. The producer runs with retries
disabled so that a duplicate can only come from the broker, never from a client retry.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from kafka.protocol.consumer import FetchRequest

from tests.support.helpers import RawClient, fetch_all, list_offset, metadata_raw

N_RECORDS = 6000


def _create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=10)
    futures[name].result(10)


def _producer(bootstrap: str) -> Producer:
    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": False,
        "message.send.max.retries": 0,  # a duplicate can only come from the broker
        "linger.ms": 2,
        "batch.num.messages": 50,
        "message.timeout.ms": 30000,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "socket.timeout.ms": 10000,
    })


def _load_with_restart(broker, topic: str, how: str) -> tuple[dict[int, int], set[int]]:
    """Produce N_RECORDS (value = b"id-<i>"); when half are acknowledged, stop the broker with `how`
    ("sigterm" or "kill") from another thread and start it again on the same data dir and port.
    Returns ({id: acknowledged offset}, {ids that failed})."""
    acked: dict[int, int] = {}
    failed: set[int] = set()
    lock = threading.Lock()
    half = threading.Event()
    produced = [0]
    produced_at_stop: list[int] = []
    restarted = threading.Event()
    restart_error: list[BaseException] = []

    def on_delivery(err, msg) -> None:
        i = int(msg.value().split(b"-")[1])
        with lock:
            if err is None:
                assert i not in acked, f"id {i} acknowledged twice"
                acked[i] = msg.offset()
                if len(acked) >= N_RECORDS // 2:
                    half.set()
            else:
                failed.add(i)

    def restarter() -> None:
        try:
            half.wait(60)
            produced_at_stop.append(produced[0])
            if how == "sigterm":
                rc = broker.stop()
                assert rc == 0, f"SIGTERM exit code {rc}"
            else:
                broker.kill()
            broker.start()
        except BaseException as exc:  # reported by the main thread
            restart_error.append(exc)
        finally:
            restarted.set()

    thread = threading.Thread(target=restarter, daemon=True)
    thread.start()
    producer = _producer(broker.bootstrap)
    for i in range(N_RECORDS):
        while True:
            try:
                producer.produce(topic, value=f"id-{i}".encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        produced[0] = i + 1
        producer.poll(0)
        if i % 200 == 199:
            time.sleep(0.02)  # keep the load spread over the restart
    assert restarted.wait(60), "restart thread did not finish"
    thread.join(10)
    assert not restart_error, restart_error
    assert produced_at_stop and produced_at_stop[0] < N_RECORDS, "the broker was stopped after the load ended"
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages neither delivered nor failed"
    return acked, failed


def _check_log(bootstrap: str, topic: str, acked: dict[int, int]) -> int:
    records = fetch_all(bootstrap, topic)
    offsets = [o for o, _k, _v in records]
    assert offsets == list(range(len(records))), "offsets are not contiguous from 0"
    seen: dict[int, int] = {}
    for offset, _key, value in records:
        assert value is not None and value.startswith(b"id-"), f"garbled value at {offset}: {value!r}"
        i = int(value[3:])
        assert i not in seen, f"id {i} stored twice (offsets {seen[i]} and {offset})"
        seen[i] = offset
    missing = sorted(set(acked) - set(seen))
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. ids {missing[:10]}"
    moved = {i: (acked[i], seen[i]) for i in acked if acked[i] != seen[i]}
    assert not moved, f"acknowledged offsets differ from stored offsets: {list(moved.items())[:10]}"
    return len(records)


def _produce_one(bootstrap: str, topic: str, value: bytes) -> int:
    producer = _producer(bootstrap)
    result: list = []
    producer.produce(topic, value=value, on_delivery=lambda err, msg: result.append((err, msg.offset())))
    assert producer.flush(20) == 0
    (err, offset), = result
    assert err is None, err
    return offset


@pytest.mark.minikafka_only
@pytest.mark.parametrize("how,segment_bytes", [("sigterm", None), ("kill", None), ("kill", "15000")],
                         ids=["sigterm", "kill", "kill-small-segments"])
def test_acknowledged_records_survive_restart_mid_load(broker_factory, how, segment_bytes):
    broker = broker_factory()
    topic = f"restart-{how}-{segment_bytes or 'default'}"
    _create_topic(broker.bootstrap, topic, configs={"segment.bytes": segment_bytes} if segment_bytes else None)
    acked, failed = _load_with_restart(broker, topic, how)
    assert len(acked) >= N_RECORDS // 2
    assert max(acked) > N_RECORDS // 2 + 100, "the load did not continue after the restart"
    assert len(acked) + len(failed) == N_RECORDS
    end = _check_log(broker.bootstrap, topic, acked)
    if segment_bytes:
        assert len(list((broker.data_dir / f"{topic}-0").glob("*.log"))) > 3, "expected several segments"
    assert list_offset(broker.bootstrap, topic, 0, -1) == (0, end)
    assert list_offset(broker.bootstrap, topic, 0, -2) == (0, 0)
    # New produces continue at the next offset, and survive another restart of the same kind.
    assert _produce_one(broker.bootstrap, topic, b"after-restart") == end
    if how == "sigterm":
        broker.restart()
    else:
        broker.kill()
        broker.start()
    records = fetch_all(broker.bootstrap, topic, start=end)
    assert records == [(end, None, b"after-restart")]
    assert _produce_one(broker.bootstrap, topic, b"after-second-restart") == end + 1


def _describe_topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(10)
    # (not the cluster-wide min.insync.replicas that a new data dir keeps with eligible leader replicas on, as
    # Kafka 4.3 formats it: a dynamic default, not a topic override)
    dynamic_default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    return {name: e.value for name, e in entries.items()
            if not e.is_default and getattr(e.source, "value", e.source) != dynamic_default}


def _snapshot(bootstrap: str, topics: list[str]) -> dict:
    with RawClient(bootstrap) as client:
        md = metadata_raw(client, topics, version=9)
    assert all(t.error_code == 0 for t in md.topics), md
    return {
        "cluster_id": md.cluster_id,
        "partitions": {t.name: sorted(p.partition_index for p in t.partitions) for t in md.topics},
        "configs": {t: _describe_topic_configs(bootstrap, t) for t in topics},
        "ends": {t: [list_offset(bootstrap, t, p, -1) for p in range(3 if t == "meta-a" else 1)] for t in topics},
    }


@pytest.mark.minikafka_only
def test_topics_configs_and_cluster_id_survive_restart(broker):
    _create_topic(broker.bootstrap, "meta-a", 3, {"retention.ms": "7200000", "cleanup.policy": "delete",
                                                   "max.message.bytes": "500000"})
    _create_topic(broker.bootstrap, "meta-b", 1, {"segment.bytes": "1048576", "retention.bytes": "9999999"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin_list = admin.list_topics(timeout=10)
    producer = _producer(broker.bootstrap)
    for p in range(3):
        for i in range(5 + p):
            producer.produce("meta-a", value=f"p{p}-{i}".encode(), partition=p)
    producer.produce("meta-b", value=b"b0")
    assert producer.flush(20) == 0
    before = _snapshot(broker.bootstrap, ["meta-a", "meta-b"])
    assert before["cluster_id"] == admin_list.cluster_id and before["cluster_id"]
    assert before["partitions"] == {"meta-a": [0, 1, 2], "meta-b": [0]}
    assert before["configs"]["meta-a"] == {"retention.ms": "7200000", "cleanup.policy": "delete",
                                           "max.message.bytes": "500000"}
    assert before["configs"]["meta-b"] == {"segment.bytes": "1048576", "retention.bytes": "9999999"}
    assert before["ends"]["meta-a"] == [(0, 5), (0, 6), (0, 7)]

    broker.restart()
    assert _snapshot(broker.bootstrap, ["meta-a", "meta-b"]) == before
    broker.kill()
    broker.start()
    assert _snapshot(broker.bootstrap, ["meta-a", "meta-b"]) == before
    with RawClient(broker.bootstrap) as client:
        names = {t.name for t in metadata_raw(client).topics}
    assert {"meta-a", "meta-b"} <= names
    for p in range(3):
        assert [v for _o, _k, v in fetch_all(broker.bootstrap, "meta-a", p)] == [
            f"p{p}-{i}".encode() for i in range(5 + p)]


@pytest.mark.minikafka_only
def test_sigterm_with_idle_client_connections_is_clean(broker):
    """A clean shutdown while clients are connected (idle, or parked in a Fetch long-poll) must not log
    errors: Kafka closes client connections quietly on controlled shutdown."""
    _create_topic(broker.bootstrap, "idle-conn")
    idle = RawClient(broker.bootstrap)
    metadata_raw(idle)
    polling = RawClient(broker.bootstrap)
    polling.send(FetchRequest(replica_id=-1, max_wait_ms=30000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                              session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                  topic="idle-conn", partitions=[FetchRequest.FetchTopic.FetchPartition(
                                      partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                      partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""), 11)
    time.sleep(0.3)  # the Fetch is parked in its long-poll
    t0 = time.monotonic()
    assert broker.stop() == 0
    assert time.monotonic() - t0 < 5, "shutdown waited for the parked Fetch"
    idle.close()
    polling.close()
    log = broker.log_text()
    assert "shut down cleanly" in log
    assert "Traceback" not in log and "ERROR" not in log, log
