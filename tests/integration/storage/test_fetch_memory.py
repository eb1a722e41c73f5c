"""Zero-copy Fetch under load: 16 consumers asking for everything at once keep the broker's memory
flat (records go from the segment files to the sockets, never through Python buffers), and a
response whose segment retention deletes while it is being sent still carries the right bytes."""
from __future__ import annotations

import os
import socket
import struct
import threading
import time

import psutil
import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest

from tests.support.helpers import RawClient, build_batch, decode_records, list_offset, produce_request, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

MB = 1 << 20
PARTITIONS = 4
PER_PARTITION = 50 * MB  # ~200 MB in all
VALUE = 16_000
RECORDS_PER_BATCH = 64  # ~1 MB batches (message.max.bytes is 1048588)
CONSUMERS = 16
RSS_BOUND = 250 * MB


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def produce_bulk(bootstrap: str, topic: str, partitions: int, per_partition: int) -> int:
    """~per_partition bytes into each partition, one 1 MB batch per partition and request (Kafka's
    rule); returns records per partition."""
    batch = build_batch([bytes([i % 251]) * VALUE for i in range(RECORDS_PER_BATCH)])
    requests = max(per_partition // len(batch), 1)
    Data = ProduceRequest.TopicProduceData
    req = ProduceRequest(acks=1, timeout_ms=30000, transactional_id=None, topic_data=[Data(name=topic, partition_data=[
        Data.PartitionProduceData(index=p, records=batch) for p in range(partitions)])])
    with RawClient(bootstrap, timeout=60) as client:
        for _ in range(requests):
            resp = client.request(req, 9)
            assert [p.error_code for p in resp.responses[0].partition_responses] == [0] * partitions
    return requests * RECORDS_PER_BATCH


class RssSampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.interval = interval
        self.samples: list[int] = []
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.samples.append(self.proc.memory_info().rss)
            time.sleep(self.interval)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return max(self.samples)


def consume_everything(bootstrap: str, topic: str, expected: int, errors: list, counts: list, idx: int) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.max.bytes": 50 * MB,
                         "max.partition.fetch.bytes": 50 * MB, "receive.message.max.bytes": 100 * MB,
                         "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        seen = [0] * PARTITIONS
        deadline = time.monotonic() + 300
        while sum(seen) < expected * PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=2000, timeout=0.5):
                if msg.error():
                    continue
                if msg.offset() != seen[msg.partition()] or len(msg.value()) != VALUE:
                    raise AssertionError(f"partition {msg.partition()}: offset {msg.offset()} after {seen[msg.partition()]}")
                if msg.value()[0] != msg.offset() % RECORDS_PER_BATCH % 251:
                    raise AssertionError(f"wrong value at {msg.partition()}/{msg.offset()}")
                seen[msg.partition()] += 1
        counts[idx] = sum(seen)
    except Exception as exc:  # reported by the test
        errors.append(exc)
    finally:
        consumer.close()


def test_sixteen_greedy_consumers_keep_broker_memory_flat(broker_factory):
    broker = broker_factory({"log.segment.bytes": str(16 * MB)})
    topic = "fetch-memory"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    t0 = time.monotonic()
    per_partition = produce_bulk(broker.bootstrap, topic, PARTITIONS, PER_PARTITION)
    produce_s = time.monotonic() - t0
    proc = psutil.Process(broker.proc.pid)
    time.sleep(0.5)
    baseline = proc.memory_info().rss

    sampler = RssSampler(broker.proc.pid)
    sampler.start()
    errors: list = []
    counts = [0] * CONSUMERS
    threads = [threading.Thread(target=consume_everything, args=(broker.bootstrap, topic, per_partition, errors, counts, i))
               for i in range(CONSUMERS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(360)
    consume_s = time.monotonic() - t0
    peak = sampler.stop()
    assert not errors, errors[0]
    assert counts == [per_partition * PARTITIONS] * CONSUMERS
    # memory comes back (there was little to give back): the consumers have left
    wait_until(lambda: proc.memory_info().rss <= baseline + 64 * MB, timeout=10, what="RSS back near baseline")
    after = proc.memory_info().rss
    delivered = CONSUMERS * PARTITIONS * per_partition * VALUE
    print(f"\nproduce {PARTITIONS * per_partition * VALUE / MB:.0f} MB in {produce_s:.1f}s; "
          f"{CONSUMERS} consumers read {delivered / MB:.0f} MB in {consume_s:.1f}s "
          f"({delivered / MB / consume_s:.0f} MB/s); broker RSS baseline {baseline / MB:.0f} MB, "
          f"peak {peak / MB:.0f} MB, after {after / MB:.0f} MB")
    assert peak < RSS_BOUND, f"peak RSS {peak / MB:.0f} MB"
    assert "Traceback" not in broker.log_text()


def fetch_request(topic: str, offset: int, max_bytes: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                            FetchRequest.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1,
                                                                   fetch_offset=offset, last_fetched_epoch=-1,
                                                                   log_start_offset=-1, partition_max_bytes=max_bytes)])],
                        forgotten_topics_data=[], rack_id="")


def value_of(i: int) -> bytes:
    return struct.pack(">q", i) * (VALUE // 8)


def open_deleted(pid: int, path) -> int:
    """How many descriptors of process `pid` point at the deleted file `path`."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}") == f"{path} (deleted)"
        except OSError:
            pass
    return n


def test_response_survives_its_segment_being_deleted_by_retention(broker_factory, tmp_path):
    broker = broker_factory({"log.retention.check.interval.ms": "100"})
    topic = "fetch-retention"
    create_topic(broker.bootstrap, topic, 1, {"segment.bytes": str(8 * MB), "file.delete.delay.ms": "0"})
    total = 1600  # ~25 MB: 3 full segments and an active one
    with RawClient(broker.bootstrap, timeout=60) as client:
        for start in range(0, total, 50):
            batch = build_batch([value_of(i) for i in range(start, start + 50)])
            assert client.request(produce_request(topic, batch, acks=1), 9).responses[0].partition_responses[0].error_code == 0
    segment0 = broker.data_dir / f"{topic}-0" / f"{0:020d}.log"
    assert segment0.exists()

    # a consumer with a tiny receive buffer asks for the whole first segment and reads a little
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    host, _, port = broker.bootstrap.rpartition(":")
    sock.connect((host, int(port)))
    sock.settimeout(30)
    raw = RawClient.__new__(RawClient)
    raw.sock, raw.client_id, raw.correlation_id = sock, "slow", 0
    raw.send(fetch_request(topic, 0, 16 * MB), 11)
    head = raw._recv_exactly(64 * 1024)
    (size,) = struct.unpack_from(">i", head)
    assert size > 7 * MB  # the response is mostly still in the broker's file slice

    # retention deletes the segment (and, with file.delete.delay.ms=0, closes its descriptor)
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("retention.bytes", "1", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    wait_until(lambda: list_offset(broker.bootstrap, topic, 0, -2)[1] > 0, timeout=20, what="retention")
    assert not segment0.exists()
    # a further retention pass closes the deleted segment's own descriptor: what still holds the
    # file open is the response's slice (its dup)
    wait_until(lambda: open_deleted(broker.proc.pid, segment0) == 1, timeout=10, what="segment fd purged")

    rest = raw._recv_exactly(size + 4 - len(head))
    sock.close()
    wait_until(lambda: open_deleted(broker.proc.pid, segment0) == 0, timeout=10, what="slice fd closed")
    resp = FetchResponse.decode(head[4:] + rest, version=11, header=True)
    (p,) = resp.responses[0].partitions
    assert p.error_code == 0
    records = decode_records(bytes(p.records))
    assert len(records) > 400
    assert [r[0] for r in records] == list(range(len(records)))
    assert all(r[2] == value_of(r[0]) for r in records)

    # the next read of the deleted range is out of range; from the new log start the data is right
    start = list_offset(broker.bootstrap, topic, 0, -2)[1]
    with RawClient(broker.bootstrap, timeout=30) as client:
        resp = client.request(fetch_request(topic, 0, MB), 11)
        assert resp.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
        resp = client.request(fetch_request(topic, start, MB), 11)
        (p,) = resp.responses[0].partitions
        records = decode_records(bytes(p.records))
        assert records and records[0][0] == start
        assert all(r[2] == value_of(r[0]) for r in records)
    assert "Traceback" not in broker.log_text()
