"""A well-behaved client that measures how fast the broker serves it while others misbehave.

Every --interval seconds it sends, on one connection, Metadata for its topic, a one-record Produce
(acks=1) and a Fetch of what it produced, and times each round trip. Prints one JSON object:
latency percentiles in ms, request count, failures.

    python -m bench.canary --bootstrap 127.0.0.1:9092 --topic canary --seconds 20
"""
from __future__ import annotations

import argparse
import json
import socket
import struct
import time

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.memory_records import MemoryRecordsBuilder


class Conn:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    def call(self, req, version: int, resp_cls):
        self.cid += 1
        req.with_header(correlation_id=self.cid, client_id="canary")
        self.sock.sendall(bytes(req.encode(version=version, header=True, framed=True)))
        (size,) = struct.unpack(">i", self._recv(4))
        resp = resp_cls.decode(self._recv(size), version=version, header=True)
        if resp.header.correlation_id != self.cid:
            raise RuntimeError("correlation id mismatch")
        return resp


def record() -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    b.append(timestamp=int(time.time() * 1000), key=None, value=b"canary", headers=[])
    b.close()
    return bytes(b.buffer())


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default="canary")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=10)
    args = ap.parse_args()
    host, _, port = args.bootstrap.rpartition(":")
    latencies: list[float] = []
    failures: list[str] = []
    conn: Conn | None = None
    offset = 0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        try:
            if conn is None:
                conn = Conn(host, int(port), args.timeout)
            t = time.monotonic()
            conn.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=args.topic)],
                                      allow_auto_topic_creation=False), 9, MetadataResponse)
            latencies.append(time.monotonic() - t)
            t = time.monotonic()
            produced = conn.call(ProduceRequest(acks=1, timeout_ms=5000, transactional_id=None, topic_data=[
                ProduceRequest.TopicProduceData(name=args.topic, partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=record())])]),
                9, ProduceResponse)
            latencies.append(time.monotonic() - t)
            p = produced.responses[0].partition_responses[0]
            if p.error_code:
                failures.append(f"produce error {p.error_code}")
            else:
                offset = p.base_offset
            t = time.monotonic()
            conn.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 16, isolation_level=0,
                                   session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                       topic=args.topic, partitions=[FetchRequest.FetchTopic.FetchPartition(
                                           partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                           log_start_offset=-1, partition_max_bytes=1 << 16)])],
                                   forgotten_topics_data=[], rack_id=""), 11, FetchResponse)
            latencies.append(time.monotonic() - t)
        except (OSError, ConnectionError, RuntimeError) as exc:
            failures.append(repr(exc))
            if conn is not None:
                conn.sock.close()
            conn = None
        time.sleep(args.interval)
    ms = [x * 1000 for x in latencies]
    print(json.dumps({"requests": len(ms), "p50_ms": round(percentile(ms, 0.5), 2),
                      "p99_ms": round(percentile(ms, 0.99), 2), "max_ms": round(max(ms, default=float("nan")), 2),
                      "failures": failures[:20], "failure_count": len(failures)}))


if __name__ == "__main__":
    main()
