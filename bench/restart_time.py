"""Restart time with many producer ids and a large log (producer-state snapshots at work).

    python -m bench.restart_time [--producers 10000] [--gib 1.0] [--segment-mib 256]

Fills one partition with idempotent batches from N distinct producer ids (raw Produce requests;
one ~100 KiB template batch whose producer id is patched and CRC recomputed per producer), then
measures spawn-to-listening for (a) a clean restart after SIGTERM (snapshot written at close) and
(b) a restart after kill -9 (snapshot of the last segment roll + replay of the batches after it).
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
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from .common import free_port


def template(records: int, size: int) -> bytearray:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=0,
                                  producer_epoch=0, base_sequence=0, batch_size=10 << 20)
    for i in range(records):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=b"x" * size, headers=[])
    return bytearray(b.build())


def with_producer(batch: bytearray, pid: int) -> bytes:
    struct.pack_into(">q", batch, 43, pid)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def start(port: int, data: str, segment_bytes: int) -> tuple[subprocess.Popen, float]:
    args = [sys.executable, "-m", "minikafka.broker.cli", "serve", "--log-level", "info",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}",
            "--override", f"log.segment.bytes={segment_bytes}"]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(data, "..", "broker.log"), "ab"))
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, time.monotonic() - t0
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("broker exited")
            time.sleep(0.002)


def fill(port: int, producers: int, batch: bytearray) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    corr = 0
    pending = 0
    for pid in range(1000, 1000 + producers):
        req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name="restart", partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=with_producer(batch, pid))])])
        corr += 1
        req.with_header(correlation_id=corr, client_id="bench")
        sock.sendall(bytes(req.encode(version=9, header=True, framed=True)))
        pending += 1
        if pending == 8 or pid == 999 + producers:
            for _ in range(pending):
                size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
                body = sock.recv(size, socket.MSG_WAITALL)
                resp = ProduceResponse.decode(body[5:], version=9)
                code = resp.responses[0].partition_responses[0].error_code
                assert code == 0, code
            pending = 0
    sock.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--producers", type=int, default=10_000)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--segment-mib", type=int, default=256)
    args = ap.parse_args()
    per_batch = int(args.gib * (1 << 30) / args.producers)
    batch = template(max(1, per_batch // 1024), 1000)
    with tempfile.TemporaryDirectory(prefix="mk-restart-") as tmp:
        data = os.path.join(tmp, "data")
        os.mkdir(data)
        port = free_port()
        seg = args.segment_mib << 20
        proc, _ = start(port, data, seg)
        t0 = time.monotonic()
        fill(port, args.producers, batch)
        size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(data) for f in fs)
        print(f"filled {size / (1 << 30):.2f} GiB from {args.producers} producer ids in "
              f"{time.monotonic() - t0:.1f} s ({len(batch)} B batches)")
        proc.kill()  # no snapshot at close: the last one is from the last segment roll
        proc.wait(30)
        proc, crash = start(port, data, seg)
        print(f"restart after kill -9 (snapshot at last roll + replay, CRC scan of the last segment): "
              f"{crash * 1000:.0f} ms to listening")
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        proc, clean = start(port, data, seg)
        print(f"clean restart after SIGTERM (snapshot at close): {clean * 1000:.0f} ms to listening")
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log = open(os.path.join(tmp, "broker.log")).read()
        replays = [line.split("minikafka.storage.")[-1] for line in log.splitlines() if "replay" in line.lower()]
        for line in replays[-3:]:
            print("  broker:", line[:160])


if __name__ == "__main__":
    main()
