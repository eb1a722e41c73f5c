"""The broker alone on the Java client's default request shape: pipelined Produce requests sent from
pre-encoded bytes, so the client costs next to nothing and the broker's own cost per request shows.

    python -m bench.produce_requests [--requests 4000] [--rounds 3] [--batch-kib 16] [--partitions 6]
                                     [--inflight 5] [--brokers minikafka,kafka]

Each request carries one idempotent batch (1 KiB records, `--batch-kib` per batch) per partition,
acks=all, as the Java producer's defaults send them (batch.size 16 KiB, max 5 requests in flight on
one connection); sequence numbers follow on, CRCs are right, so the broker does all its checks. Both
brokers run for the whole run (warm), one discarded round each, then rounds alternating the brokers;
the broker not under test runs at nice 19 meanwhile (bench.brokers.backgrounded).
Prints MB/s, broker CPU s/GB and CPU µs per request; `--out` updates section `requests` of
BENCHMARKS.md. The client is one Python process that only writes bytes and reads answers.
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import crc32c
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from .brokers import BrokerProc, alternating_rounds, cpu_seconds
from .canary import Conn
from .report import ROOT, fmt, load_average, replace_section, setup_block
from .workloads import create_topic

PRODUCE_VERSION = 9  # what a Java 4.x client sends to a broker without topic ids in its metadata use
RECORD = 1000  # value bytes; with the record overhead about 1 KiB per record
_SIZE = struct.Struct(">i")
RETRIABLE = (14, 15, 51)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS
_SEQ_OFFSET, _CRC_OFFSET, _ATTRIBUTES_OFFSET = 53, 17, 21


class Connection(Conn):
    """bench.canary's blocking connection, with requests encoded ahead and answers read in order."""

    def __init__(self, bootstrap: str) -> None:
        host, _, port = bootstrap.rpartition(":")
        super().__init__(host, int(port), timeout=60)

    def frame(self, req, version: int) -> bytes:
        self.cid += 1
        req.with_header(correlation_id=self.cid, client_id="bench-requests")
        return bytes(req.encode(version=version, header=True, framed=True))

    def recv_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._recv(4))
        return self._recv(size)


def _batch_template(producer_id: int, epoch: int, records: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=epoch, base_sequence=0,
                                        batch_size=1 << 30)
    value, now = os.urandom(RECORD), int(time.time() * 1000)
    for i in range(records):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytearray(builder.build())


def run(bootstrap: str, broker_pid: int, requests: int, partitions: int, batch_kib: int,
        inflight: int) -> dict[str, float]:
    """One round on a fresh topic: MB/s, broker CPU s/GB and µs per request."""
    topic = f"requests-{time.time_ns()}"
    create_topic(bootstrap, topic, partitions)
    conn = Connection(bootstrap)
    try:
        deadline = time.monotonic() + 60
        while True:  # a fresh Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its producer ids are ready
            conn.sock.sendall(conn.frame(InitProducerIdRequest[1](transactional_id=None,
                                                                  transaction_timeout_ms=60000), 1))
            init = InitProducerIdResponse[1].decode(conn.recv_frame(), version=1, header=True)
            if not init.error_code:
                break
            if init.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise RuntimeError(f"InitProducerId error {init.error_code}")
            time.sleep(0.2)
        per_batch = max(1, batch_kib * 1024 // (RECORD + 24))
        template = _batch_template(init.producer_id, init.producer_epoch, per_batch)
        topic_data = ProduceRequest.TopicProduceData
        sequences = [0] * partitions
        frames = []
        for _ in range(requests):  # encoded up front: the timed part only moves bytes
            parts = []
            for p in range(partitions):
                struct.pack_into(">i", template, _SEQ_OFFSET, sequences[p])
                struct.pack_into(">I", template, _CRC_OFFSET, crc32c.crc32c(memoryview(template)[_ATTRIBUTES_OFFSET:]))
                sequences[p] += per_batch
                parts.append(topic_data.PartitionProduceData(index=p, records=bytes(template)))
            frames.append(conn.frame(ProduceRequest[PRODUCE_VERSION](
                transactional_id=None, acks=-1, timeout_ms=30000,
                topic_data=[topic_data(name=topic, partition_data=parts)]), PRODUCE_VERSION))
        c0, t0 = cpu_seconds(broker_pid), time.perf_counter()
        sent = done = 0
        while done < requests:
            while sent < requests and sent - done < inflight:
                conn.sock.sendall(frames[sent])
                sent += 1
            conn.recv_frame()
            done += 1
        seconds, cpu = time.perf_counter() - t0, cpu_seconds(broker_pid) - c0
    finally:
        conn.sock.close()
    gb = requests * partitions * len(template) / 1e9
    return {"MB/s": gb * 1000 / seconds, "cpu s/GB": cpu / gb, "us/request": cpu / requests * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--batch-kib", type=int, default=16)
    ap.add_argument("--inflight", type=int, default=5)
    ap.add_argument("--brokers", default="minikafka,kafka")
    ap.add_argument("--out", help="Markdown file whose section `requests` to update (e.g. BENCHMARKS.md)")
    args = ap.parse_args()
    kinds = args.brokers.split(",")
    started, load_before = datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), load_average()
    work = Path(tempfile.mkdtemp(prefix="bench-requests-"))
    brokers = {kind: BrokerProc(kind, work / kind) for kind in kinds}
    results: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    try:
        for b in brokers.values():
            b.work_dir.mkdir(parents=True, exist_ok=True)
            b.start()
        # the other broker backgrounded: a warm JVM's after-work yields to the test
        for label, kind, idle_cpu in alternating_rounds(brokers, args.rounds):
            res = run(brokers[kind].bootstrap, brokers[kind].pid, args.requests, args.partitions,
                      args.batch_kib, args.inflight)
            res["idle broker CPU s"] = idle_cpu()
            print(f"{label} {kind:9} " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()), flush=True)
            if label != "warm-up":
                results[kind].append(res)
    finally:
        for b in brokers.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    med = {kind: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for kind, rs in results.items() if rs}
    rows = ["| broker | MB/s | broker CPU s/GB | CPU µs per request |", "| --- | ---: | ---: | ---: |"]
    for kind, m in med.items():
        rows.append(f"| {kind} | {fmt(m['MB/s'])} | {fmt(m['cpu s/GB'])} | {fmt(m['us/request'])} |")
    if "minikafka" in med and "kafka" in med:
        rows.append(f"| ratio | {med['minikafka']['MB/s'] / med['kafka']['MB/s']:.2f}× | "
                    f"{med['minikafka']['cpu s/GB'] / med['kafka']['cpu s/GB']:.2f} | |")
    table = "\n".join(rows)
    print(table)
    if args.out:
        command = "python -m bench.produce_requests " + " ".join(sys.argv[1:])
        body = "\n".join([setup_block(command, started, load_before), "",
                          f"{args.requests} requests × {args.partitions} partitions × one {args.batch_kib} KiB "
                          f"idempotent batch, {args.inflight} in flight, acks=all; medians of {args.rounds} rounds "
                          "after a discarded one, both brokers warm.", "", table])
        replace_section(Path(args.out) if args.out != "BENCHMARKS.md" else ROOT / "BENCHMARKS.md", "requests", body)


if __name__ == "__main__":
    main()
