"""Restart time: many producer ids and a large log, or many partitions.

    python -m bench.restart_time [--producers 10000] [--gib 1.0] [--segment-mib 256] [--partitions 1]

Creates topic `restart` with `--partitions` partitions and fills it with ~100 KiB batches (raw
Produce requests; one template batch whose producer fields are patched and CRC recomputed per batch):
the first `--producers` batches come from distinct idempotent producer ids, the rest (if `--gib`
needs more) from no producer id; batch i goes to partition i % partitions. Then, for (a) a restart
after kill -9 (no snapshot at close: the last one is from the last segment roll) and (b) a clean
restart after SIGTERM, it measures from spawn:
- listening: the port accepts connections;
- metadata: a Metadata request for all topics is answered;
- all ready: one ListOffsets(latest) for every partition is answered (every partition log opened,
  recovered if needed, producer state loaded) and the offsets match those before the restart.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import crc32c
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from .common import free_port

TOPIC = "restart"


def template(records: int, size: int) -> bytearray:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=0,
                                  producer_epoch=0, base_sequence=0, batch_size=10 << 20)
    for i in range(records):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=b"x" * size, headers=[])
    return bytearray(b.build())


def with_producer(batch: bytearray, pid: int) -> bytes:
    """The batch from producer `pid` (sequence 0, epoch 0), or from no producer if pid < 0."""
    idempotent = pid >= 0
    struct.pack_into(">qhi", batch, 43, pid if idempotent else -1, 0 if idempotent else -1, 0 if idempotent else -1)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))
    return bytes(batch)


class Conn:
    """A blocking connection sending kafka.protocol requests, up to `window` in flight."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.corr = 0

    def send(self, req, version: int) -> None:
        self.corr += 1
        req.with_header(correlation_id=self.corr, client_id="bench")
        self.sock.sendall(bytes(req.encode(version=version, header=True, framed=True)))

    def recv(self, resp_cls, version: int):
        size = struct.unpack(">i", self.sock.recv(4, socket.MSG_WAITALL))[0]
        body = self.sock.recv(size, socket.MSG_WAITALL)
        return resp_cls.decode(body, version=version, header=True)

    def call(self, req, resp_cls, version: int):
        self.send(req, version)
        return self.recv(resp_cls, version)

    def close(self) -> None:
        self.sock.close()


def start(port: int, data: str, segment_bytes: int) -> tuple[subprocess.Popen, float]:
    args = [sys.executable, "-m", "minikafka.broker.cli.main", "serve", "--log-level", "info",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}",
            "--override", f"log.segment.bytes={segment_bytes}"]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(data, "..", "broker.log"), "ab"))
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, t0
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("broker exited")
            time.sleep(0.002)


def create_topic(port: int, partitions: int, segment_bytes: int) -> None:
    c = Conn(port)
    resp = c.call(CreateTopicsRequest(timeout_ms=60000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=partitions, replication_factor=1,
                                           assignments=[], configs=[
                                               CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                                                   name="segment.bytes", value=str(segment_bytes))])]),
                  CreateTopicsResponse, 4)
    c.close()
    assert resp.topics[0].error_code == 0, resp


def fill(port: int, batches: int, producers: int, partitions: int, batch: bytearray) -> None:
    c = Conn(port)
    pending = 0
    for i in range(batches):
        pid = 1000 + i if i < producers else -1
        c.send(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=i % partitions, records=with_producer(batch, pid))])]), 9)
        pending += 1
        if pending == 8 or i == batches - 1:
            for _ in range(pending):
                resp = c.recv(ProduceResponse, 9)
                code = resp.responses[0].partition_responses[0].error_code
                assert code == 0, code
            pending = 0
    c.close()


def end_offsets(c: Conn, partitions: int) -> list[int]:
    resp = c.call(ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=60000, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=p, current_leader_epoch=-1, timestamp=-1) for p in range(partitions)])]),
        ListOffsetsResponse, 7)
    parts = sorted(resp.topics[0].partitions, key=lambda p: p.partition_index)
    assert all(p.error_code == 0 for p in parts), [p.error_code for p in parts if p.error_code][:5]
    return [p.offset for p in parts]


def measure(port: int, data: str, seg: int, partitions: int,
            expected: list[int] | None) -> tuple[subprocess.Popen, dict]:
    proc, t0 = start(port, data, seg)
    out = {"listening": time.monotonic() - t0}
    c = Conn(port)
    md = c.call(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                include_cluster_authorized_operations=False,
                                include_topic_authorized_operations=False), MetadataResponse, 9)
    out["metadata"] = time.monotonic() - t0
    assert [len(t.partitions) for t in md.topics if t.name == TOPIC] == [partitions]
    offsets = end_offsets(c, partitions)
    out["all ready"] = time.monotonic() - t0
    c.close()
    if expected is not None:
        assert offsets == expected, "offsets changed across the restart"
    out["offsets"] = offsets
    return proc, out


def show(label: str, m: dict) -> None:
    print(f"{label}: listening {m['listening'] * 1000:.0f} ms, metadata {m['metadata'] * 1000:.0f} ms, "
          f"every partition answered ListOffsets {m['all ready'] * 1000:.0f} ms (from spawn)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--producers", type=int, default=10_000)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--segment-mib", type=int, default=256)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--batch-kib", type=int, default=0, help="batch size (default: gib / producers, ~100 KiB)")
    args = ap.parse_args()
    total = int(args.gib * (1 << 30))
    per_batch = args.batch_kib << 10 if args.batch_kib else total // max(args.producers, 1)
    batch = template(max(1, per_batch // 1024), 1000)
    batches = max(args.producers, total // len(batch))
    with tempfile.TemporaryDirectory(prefix="mk-restart-") as tmp:
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        port = free_port()
        seg = args.segment_mib << 20
        proc, _ = start(port, data, seg)
        t0 = time.monotonic()
        create_topic(port, args.partitions, seg)
        fill(port, batches, args.producers, args.partitions, batch)
        c = Conn(port)
        expected = end_offsets(c, args.partitions)
        c.close()
        size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(data) for f in fs)
        print(f"filled {size / (1 << 30):.2f} GiB in {args.partitions} partition(s), {batches} batches "
              f"({len(batch)} B), {min(args.producers, batches)} producer ids, in {time.monotonic() - t0:.1f} s")
        proc.kill()  # no snapshot at close: the last one is from the last segment roll
        proc.wait(30)
        proc, crash = measure(port, data, seg, args.partitions, expected)
        show("restart after kill -9", crash)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        proc, clean = measure(port, data, seg, args.partitions, expected)
        show("clean restart after SIGTERM", clean)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log = open(os.path.join(tmp, "broker.log")).read().splitlines()
        ends = [i for i, line in enumerate(log) if "shut down cleanly" in line][-2:]
        for label, begin, end in zip(("kill -9", "clean"), [0] + ends[:1], ends):  # each restart's lines
            lines = log[begin:end + 1]
            ready = [line for line in lines if " started in " in line][-1:]
            notes = [line for line in lines if "producer state of" in line or "recovered" in line
                     or "in the background" in line][:3]
            for line in ready + notes:
                print(f"  broker ({label}):", line.split(": ", 1)[-1][:150])

if __name__ == "__main__":
    main()
