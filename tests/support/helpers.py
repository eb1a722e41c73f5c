"""Shared test helpers: a tiny raw Kafka client over a real socket, batch builders, fetch-all.

Requests are built and responses decoded with kafka-python's `kafka.protocol` classes, so the bytes
on the wire are what a stock client sends. Append new helpers at the end of this file.
"""
from __future__ import annotations

import socket
import struct
import time

from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder


def _addr(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


class RawClient:
    """One blocking connection; `request()` sends a kafka.protocol request and decodes the answer."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "raw-test") -> None:
        self.sock = socket.create_connection(_addr(bootstrap), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def encode(self, req, version: int) -> bytes:
        """The full frame (size + header + body) of `req` at `version`."""
        self.correlation_id += 1
        req.with_header(correlation_id=self.correlation_id, client_id=self.client_id)
        return bytes(req.encode(version=version, header=True, framed=True))

    def send(self, req, version: int) -> int:
        self.send_bytes(self.encode(req, version))
        return self.correlation_id

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        """One response frame without its size prefix."""
        (size,) = struct.unpack(">i", self._recv_exactly(4))
        return self._recv_exactly(size)

    def recv(self, resp_cls, version: int):
        frame = self.recv_frame()
        resp = resp_cls.decode(frame, version=version, header=True)
        assert resp.header.correlation_id == self.correlation_id, (resp.header.correlation_id, self.correlation_id)
        return resp

    def request(self, req, version: int, resp_cls=None):
        if resp_cls is None:
            resp_cls = _RESPONSES.get(type(req).__name__.split("_v")[0])
        if resp_cls is None:
            from kafka.protocol.api_header import ResponseClassRegistry
            resp_cls = ResponseClassRegistry._response_class_registry[req.API_KEY]
        self.send(req, version)
        return self.recv(resp_cls, version)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection (EOF/reset) within `timeout` without sending data;
        raises AssertionError if it sends bytes instead."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        if data:
            raise AssertionError(f"expected the connection to close, got {len(data)} bytes: {data[:64]!r}")
        return True


_RESPONSES = {
    "ProduceRequest": ProduceResponse,
    "FetchRequest": FetchResponse,
    "ListOffsetsRequest": ListOffsetsResponse,
    "MetadataRequest": MetadataResponse,
    "ApiVersionsRequest": ApiVersionsResponse,
}


def build_batch(values: list[bytes], *, keys: list[bytes | None] | None = None, magic: int = 2,
                compression: int = 0, timestamp_ms: int | None = None) -> bytes:
    """One record batch (base offset 0) holding `values`, built by kafka-python's MemoryRecordsBuilder."""
    builder = MemoryRecordsBuilder(magic=magic, compression_type=compression, batch_size=1 << 30)
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        kwargs = {"headers": []} if magic == 2 else {}
        assert builder.append(timestamp=ts + i, key=key, value=value, **kwargs) is not None
    builder.close()
    return bytes(builder.buffer())


def produce_request(topic: str, records: bytes, *, partition: int = 0, acks: int = -1,
                    timeout_ms: int = 5000) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=timeout_ms, transactional_id=None, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def produce_raw(client: RawClient, topic: str, records: bytes, *, partition: int = 0, acks: int = -1,
                version: int = 9):
    """Produce one record set; returns the single PartitionProduceResponse."""
    resp = client.request(produce_request(topic, records, partition=partition, acks=acks), version)
    (t,) = resp.responses
    (p,) = t.partition_responses
    return p


def metadata_raw(client: RawClient, topics: list[str] | None = None, version: int = 9, auto_create: bool = False):
    req = MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False)
    return client.request(req, version)


def list_offset(bootstrap_or_client, topic: str, partition: int = 0, timestamp: int = -1,
                version: int = 7) -> tuple[int, int]:
    """(error_code, offset) from ListOffsets; timestamp -1 = latest, -2 = earliest."""
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
    client = bootstrap_or_client if isinstance(bootstrap_or_client, RawClient) else RawClient(bootstrap_or_client)
    try:
        resp = client.request(req, version)
    finally:
        if client is not bootstrap_or_client:
            client.close()
    (p,) = resp.topics[0].partitions
    return p.error_code, p.offset


def fetch_once(client: RawClient, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
               version: int = 11, max_wait_ms: int = 0):
    """One Fetch; returns the PartitionData."""
    req = FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=max_bytes,
                       isolation_level=0, session_id=0, session_epoch=-1, topics=[
                           FetchRequest.FetchTopic(topic=topic, partitions=[
                               FetchRequest.FetchTopic.FetchPartition(
                                   partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                   log_start_offset=-1, partition_max_bytes=max_bytes)])],
                       forgotten_topics_data=[], rack_id="")
    resp = client.request(req, version)
    assert resp.error_code == 0, resp
    (p,) = resp.responses[0].partitions
    return p


def decode_records(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in fetched bytes; asserts CRCs and whole batches."""
    out = []
    pos = 0
    view = memoryview(data)
    while pos + 12 <= len(view):
        (length,) = struct.unpack_from(">i", view, pos + 8)
        size = length + 12
        if pos + size > len(view):
            break  # a partial trailing batch is allowed in a fetch response
        batch = DefaultRecordBatch(bytes(view[pos:pos + size]))
        assert batch.validate_crc(), f"CRC mismatch in fetched batch at byte {pos}"
        if not batch.is_control_batch:
            out.extend((r.offset, r.key, r.value) for r in batch)
        pos += size
    return out


def fetch_all(bootstrap: str, topic: str, partition: int = 0, start: int = 0, *, end: int | None = None,
              max_bytes: int = 256 * 1024, version: int = 11) -> list[tuple[int, bytes | None, bytes | None]]:
    """Consume [start, high watermark) (or up to `end`) with raw Fetches; returns (offset, key, value)."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    with RawClient(bootstrap) as client:
        offset = start
        while True:
            p = fetch_once(client, topic, partition, offset, max_bytes=max_bytes, version=version)
            assert p.error_code == 0, f"fetch at {offset}: error {p.error_code}"
            stop = p.high_watermark if end is None else min(end, p.high_watermark)
            if offset >= stop:
                return out
            records = [r for r in decode_records(bytes(p.records or b"")) if r[0] >= offset]
            assert records, f"no records returned at offset {offset} (hw {p.high_watermark})"
            out.extend(r for r in records if r[0] < stop)
            offset = records[-1][0] + 1


def api_versions_raw(client: RawClient, version: int = 3):
    req = ApiVersionsRequest(client_software_name="raw-test", client_software_version="1.0")
    return client.request(req, version)


def assert_broker_healthy(bootstrap: str) -> None:
    """A fresh connection still gets ApiVersions and Metadata answers."""
    with RawClient(bootstrap) as client:
        av = api_versions_raw(client)
        assert av.error_code == 0 and av.api_keys
        md = metadata_raw(client)
        assert len(md.brokers) == 1


# --- stock-client helpers (integration tests) -------------------------------------------------

def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05, what: str = ""):
    """Poll until predicate() is truthy; return its value or fail with `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def confluent_consumer(bootstrap: str, **extra):
    """A confluent-kafka Consumer for assign()-based reads (group.id is required but never used)."""
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": bootstrap, "group.id": "minikafka-tests-unused",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100}
    conf.update(extra)
    return Consumer(conf)


def confluent_consume(bootstrap: str, topic: str, expected: dict[int, int], start: dict[int, int] | None = None,
                      timeout: float = 30.0, **extra) -> dict[int, list]:
    """Read each partition (from `start[p]`, default the beginning) until `expected[p]` messages arrived;
    returns partition -> confluent Message objects in delivery order."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    consumer = confluent_consumer(bootstrap, **extra)
    got: dict[int, list] = {p: [] for p in expected}
    try:
        consumer.assign([TopicPartition(topic, p, (start or {}).get(p, OFFSET_BEGINNING)) for p in expected])
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < n for p, n in expected.items()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out: got {({p: len(v) for p, v in got.items()})}, expected {expected}")
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consume error: {msg.error()}")
                got[msg.partition()].append(msg)
    finally:
        consumer.close()
    return got


def confluent_watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) watermarks, queried from the broker (not cached)."""
    from confluent_kafka import TopicPartition

    consumer = confluent_consumer(bootstrap)
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        consumer.close()


def wait_broker_connections_closed(broker, timeout: float = 5.0) -> bool:
    """Wait until the broker process holds no client TCP connections (only its listening socket).

    A consumer that disconnects while its Fetch long-poll is parked leaves the broker side open until
    the poll expires, and a client object kept alive keeps its socket. Module-scoped fixtures call
    this before the shared broker is stopped, so that its shutdown is judged on a quiet broker.
    Returns whether the broker went quiet (not fatal: the shutdown check itself then decides).
    """
    import gc
    import sys

    import psutil

    # pytest keeps the last failure's traceback (and so the failed test's clients) in sys.last_*
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()  # clients dropped by the tests close their sockets when collected
    if not hasattr(broker, "proc"):
        return True  # not a minikafka subprocess we started (--broker=kafka|host:port)
    proc = psutil.Process(broker.proc.pid)

    def quiet() -> bool:
        return not [c for c in proc.net_connections(kind="tcp") if c.status != psutil.CONN_LISTEN]

    try:
        wait_until(quiet, timeout=timeout, interval=0.05, what="broker client connections to close")
        return True
    except AssertionError:
        return False


def wait_topic_ready(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Until ListOffsets answers for every partition: Apache Kafka elects leaders asynchronously after
    CreateTopics returns (minikafka is ready at once). Tests that must not lose acks=0 data use it."""
    def ready() -> bool:
        try:
            return all(confluent_watermarks(bootstrap, topic, p)[1] >= 0 for p in range(partitions))
        except Exception:
            return False
    wait_until(ready, timeout=timeout, interval=0.1, what=f"{topic}: leaders for {partitions} partitions")
