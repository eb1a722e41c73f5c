"""Hostile load against a running broker: what a buggy or malicious client fleet does at once.

Scenarios (all concurrent, for --seconds):
  slow       connections that send a frame's size and a little of it, then trickle or stall
  fetch      a fetch storm: clients asking for everything (max_bytes 2 GiB) from offset 0, again and again
  produce    a max-size produce storm: requests of --produce-mb MB (1 MB batches over many partitions)
  create     a CreateTopics far over the partition bound, and one big allowed creation
  pipeline   one connection pipelining --pipeline Metadata requests without reading
  conns      --conns concurrent connections that each send ApiVersions and stay open

    python -m bench.hostile_load --bootstrap 127.0.0.1:9092 --seconds 20 [--scale 1]

Prints one JSON object with what each scenario did. The canary (bench/canary.py) runs in its own
process so its latencies are not distorted by this process's event loop.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import struct
import time

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

CLIENT_ID = "hostile"


def frame(req, version: int, correlation_id: int = 1) -> bytes:
    req.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(req.encode(version=version, header=True, framed=True))


def with_correlation_id(data: bytes, correlation_id: int) -> bytes:
    """Frames are size(4) api_key(2) api_version(2) correlation_id(4) ...: patch the id in place."""
    return data[:8] + struct.pack(">i", correlation_id) + data[12:]


def one_mb_batch() -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
    now = int(time.time() * 1000)
    value = b"h" * 1000
    for i in range(1000):
        builder.append(timestamp=now, key=None, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


class Stats(dict):
    def add(self, key: str, n: int = 1) -> None:
        self[key] = self.get(key, 0) + n


async def slow_frames(host: str, port: int, n: int, until: float, stats: Stats) -> None:
    """Half-sent 8 MB frames: half of them stall, half trickle a byte a second."""
    async def one(i: int) -> None:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            stats.add("slow_connect_failed")
            return
        try:
            writer.write(struct.pack(">i", 8 << 20) + b"\x00" * (64 << 10))
            await writer.drain()
            while time.monotonic() < until:
                if i % 2:
                    writer.write(b"\x00")
                    await writer.drain()
                try:
                    data = await asyncio.wait_for(reader.read(1), 1.0)
                except (asyncio.TimeoutError, TimeoutError):
                    continue
                if data == b"":
                    stats.add("slow_closed_by_broker")
                    return
        except (ConnectionError, OSError):
            stats.add("slow_closed_by_broker")
            return
        finally:
            writer.close()
        stats.add("slow_still_open")
    await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)


async def fetch_storm(host: str, port: int, topic: str, n: int, until: float, stats: Stats) -> None:
    req = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=2**31 - 1, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                           FetchRequest.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                                  log_start_offset=-1,
                                                                  partition_max_bytes=2**31 - 1)])],
                       forgotten_topics_data=[], rack_id="")
    data = frame(req, 11)

    async def one() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.monotonic() < until:
                writer.write(data)
                body = await read_frame(reader)
                stats.add("fetch_responses")
                stats.add("fetch_bytes", len(body))
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            stats.add("fetch_errors")
        finally:
            writer.close()
    await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)


async def produce_storm(host: str, port: int, topic: str, partitions: int, n: int, until: float,
                        stats: Stats) -> None:
    batch = one_mb_batch()
    req = ProduceRequest(acks=1, timeout_ms=30000, transactional_id=None, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=batch)
            for p in range(partitions)])])
    data = frame(req, 9)

    async def one() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.monotonic() < until:
                writer.write(data)
                await writer.drain()
                await read_frame(reader)
                stats.add("produce_responses")
                stats.add("produce_mb", partitions)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            stats.add("produce_errors")
        finally:
            writer.close()
    await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)


async def huge_create(host: str, port: int, big: int, allowed: int, stats: Stats) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        for i, (name, count) in enumerate(((f"hostile-huge-{time.time_ns()}", big),
                                           (f"hostile-big-{time.time_ns()}", allowed))):
            req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=count, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=60000, validate_only=False)
            t0 = time.monotonic()
            writer.write(frame(req, 5, i + 1))
            await read_frame(reader)
            stats[f"create_{count}_seconds"] = round(time.monotonic() - t0, 3)
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        stats.add("create_errors")
    finally:
        writer.close()


async def pipeline(host: str, port: int, topic: str, count: int, stats: Stats) -> None:
    """Metadata for one topic, as clients ask it, pipelined without waiting for answers."""
    reader, writer = await asyncio.open_connection(host, port)
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    base = frame(req, 9)

    async def send() -> None:
        chunk = []
        for i in range(count):
            chunk.append(with_correlation_id(base, i))
            if len(chunk) == 1000:
                writer.write(b"".join(chunk))
                chunk.clear()
                await writer.drain()
        writer.write(b"".join(chunk))
        await writer.drain()
    try:
        t0 = time.monotonic()
        sender = asyncio.create_task(send())
        for _ in range(count):
            await read_frame(reader)
        await sender
        stats["pipeline_seconds"] = round(time.monotonic() - t0, 3)
        stats["pipeline_responses"] = count
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        stats.add("pipeline_errors")
    finally:
        writer.close()


async def many_connections(host: str, port: int, n: int, until: float, stats: Stats) -> None:
    data = frame(ApiVersionsRequest(client_software_name="hostile", client_software_version="1"), 3)
    writers = []

    async def one() -> None:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writers.append(writer)
            writer.write(data)
            await asyncio.wait_for(read_frame(reader), 30)
            stats.add("conns_answered")
        except (ConnectionError, asyncio.IncompleteReadError, OSError, asyncio.TimeoutError):
            stats.add("conns_refused_or_failed")
    await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)
    await asyncio.sleep(max(until - time.monotonic(), 0))
    for w in writers:
        w.close()


async def run(args: argparse.Namespace) -> Stats:
    host, _, port_s = args.bootstrap.rpartition(":")
    port = int(port_s)
    stats = Stats()
    until = time.monotonic() + args.seconds
    scale = args.scale
    await asyncio.gather(
        slow_frames(host, port, 100 * scale, until, stats),
        fetch_storm(host, port, args.fetch_topic, 16 * scale, until, stats),
        produce_storm(host, port, args.produce_topic, args.produce_mb, 16 * scale, until, stats),
        huge_create(host, port, 200_000, args.create_partitions, stats),
        pipeline(host, port, args.fetch_topic, args.pipeline * scale, stats),
        many_connections(host, port, args.conns * scale, until, stats),
    )
    return stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--scale", type=int, default=1, help="multiply connection counts (make soak)")
    ap.add_argument("--fetch-topic", default="hostile-fetch")
    ap.add_argument("--produce-topic", default="hostile-produce")
    ap.add_argument("--produce-mb", type=int, default=30, help="1 MB batches per produce request (partitions)")
    ap.add_argument("--create-partitions", type=int, default=1000)
    ap.add_argument("--pipeline", type=int, default=20_000)
    ap.add_argument("--conns", type=int, default=1000)
    args = ap.parse_args()
    stats = asyncio.run(run(args))
    print(json.dumps(stats, sort_keys=True))


if __name__ == "__main__":
    main()
