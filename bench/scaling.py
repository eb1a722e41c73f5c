"""Scaling: partitions, client processes, restart time as partitions and data grow.

Each point is one run per broker (no medians), brokers alternating point by point.
"""
from __future__ import annotations

import multiprocessing as mp
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from .brokers import BrokerProc
from .canary import Conn
from .workloads import RECORD, ack_latencies, consume_mbps, create_topic, failure_label, guarded, p99, produce_mbps

Cell = dict[str, float | None]  # column -> value
CLIENT_PARTITIONS = 16
P = TypeVar("P")


@dataclass
class Plan:
    """What the scaling run covers; `records` per throughput point, `seconds` per fixed-rate p99."""
    partitions: tuple[int, ...] = (1, 10, 100, 1000)
    clients: tuple[int, ...] = (1, 4, 16)
    restarts: tuple[tuple[int, int], ...] = ((10, 100), (100, 300), (1000, 1000))  # (partitions, MB)
    records: int = 200_000
    seconds: float = 3.0
    mbps: float = 10.0


def topic_name(prefix: str) -> str:
    return f"{prefix}-{time.time_ns()}"


# ------------------------------------------------------------------------------------- partitions --

def partitions_point(bs: str, parts: int, plan: Plan) -> Cell:
    """One topic of `parts` partitions: create time, produce MB/s (round robin over all partitions),
    consume MB/s (all partitions), p99 ack latency at plan.mbps."""
    topic, out = topic_name(f"sp{parts}"), {}
    out["create s"] = guarded("create", lambda: create_topic(bs, topic, parts), 300)
    if out["create s"] is None:
        return out
    timeout = 120 + plan.records * RECORD / 1e6
    out["produce MB/s"] = guarded(f"produce {parts}p", lambda: produce_mbps(
        bs, topic, plan.records, part_of=lambda i: i % parts), timeout)
    if out["produce MB/s"] is not None:
        out["consume MB/s"] = guarded(f"consume {parts}p", lambda: consume_mbps(
            bs, topic, parts, plan.records, read_committed=False), timeout)
    res = guarded(f"ack p99 {parts}p", lambda: ack_latencies(bs, topic, parts, plan.seconds, plan.mbps),
                  plan.seconds + 120)
    out["p99 ack ms"] = p99(res[0]) * 1000 if res else None
    out["Produce req/s"] = res[1] / plan.seconds if res else None
    return out


# ---------------------------------------------------------------------------------------- clients --

def _client(role: str, bs: str, topic: str, arg: int | list[int], plan: Plan, barrier, out) -> None:
    """A client process: waits on the barrier, then produces or consumes; puts (start, end, latencies)
    or an error string on `out`."""
    marks: list[float] = []

    def go() -> None:
        barrier.wait(120)
        marks.append(time.time())
    try:
        lat: list[float] = []
        if role == "produce":
            assert isinstance(arg, int)
            produce_mbps(bs, topic, arg, part_of=lambda i: i % CLIENT_PARTITIONS, before=go)
        elif role == "rate":
            assert isinstance(arg, int)
            lat = ack_latencies(bs, topic, CLIENT_PARTITIONS, plan.seconds, plan.mbps / arg, before=go)[0]
        else:
            assert isinstance(arg, list)
            n = len(arg) * (plan.records // CLIENT_PARTITIONS)
            consume_mbps(bs, topic, arg, n, read_committed=False, before=go)
        out.put((marks[0], time.time(), lat))
    except Exception as exc:  # noqa: BLE001 - reported by the parent
        out.put(repr(exc))


def run_clients(role: str, bs: str, topic: str, n: int, plan: Plan) -> tuple[float, list[float]]:
    """n client processes (multiprocessing, spawn); (aggregate MB/s over the wall time from the common
    start to the last finish, all latencies)."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(n), ctx.Queue()
    args: list[int | list[int]]
    if role == "produce":
        args = [plan.records // n] * n
    elif role == "rate":
        args = [n] * n
    else:
        args = [list(range(i, CLIENT_PARTITIONS, n)) for i in range(n)]
    procs = [ctx.Process(target=_client, args=(role, bs, topic, a, plan, barrier, out), daemon=True)
             for a in args]
    for p in procs:
        p.start()
    results, ok = [], False
    try:
        deadline = time.monotonic() + 180 + plan.records * RECORD / 1e6
        for _ in procs:
            r = out.get(timeout=max(1.0, deadline - time.monotonic()))
            if isinstance(r, str):
                raise RuntimeError(f"client failed: {r}")
            results.append(r)
        ok = True
    except queue.Empty:
        raise TimeoutError(f"{role} x{n}: clients did not finish") from None
    finally:
        end = time.monotonic() + (10 if ok else 0)
        for p in procs:
            p.join(max(0.0, end - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(5)
    wall = max(r[1] for r in results) - min(r[0] for r in results)
    if role == "produce":
        total = plan.records // n * n
    elif role == "consume":
        total = plan.records // CLIENT_PARTITIONS * CLIENT_PARTITIONS
    else:
        total = 0
    return total * RECORD / 1e6 / wall, [x for r in results for x in r[2]]


def clients_point(bs: str, n: int, plan: Plan, consume_topic: str) -> Cell:
    """n producers (throughput, then p99 ack latency at plan.mbps in total), n consumers."""
    out: Cell = {}
    topic = topic_name(f"sc{n}")
    if guarded("create", lambda: create_topic(bs, topic, CLIENT_PARTITIONS), 120) is None:
        return {"produce MB/s": None}
    timeout = 240 + plan.records * RECORD / 1e6
    r = guarded(f"{n} producers", lambda: run_clients("produce", bs, topic, n, plan), timeout)
    out["produce MB/s"] = r[0] if r else None
    r = guarded(f"{n} producers @rate", lambda: run_clients("rate", bs, topic, n, plan), timeout)
    out["p99 ack ms"] = p99(r[1]) * 1000 if r and r[1] else None
    r = guarded(f"{n} consumers", lambda: run_clients("consume", bs, consume_topic, n, plan), timeout)
    out["consume MB/s"] = r[0] if r else None
    return out


def fill_consume_topic(bs: str, plan: Plan) -> str:
    """The topic the consumer points read: plan.records rounded down to a multiple of 16, round robin."""
    topic = topic_name("scc")
    create_topic(bs, topic, CLIENT_PARTITIONS)
    n = plan.records // CLIENT_PARTITIONS * CLIENT_PARTITIONS
    produce_mbps(bs, topic, n - 1, part_of=lambda i: (i + 1) % CLIENT_PARTITIONS)  # + the warm-up record
    return topic


# ---------------------------------------------------------------------------------------- restart --

def _served(port: int, topic: str, parts: int, t0: float, deadline: float) -> tuple[float, float]:
    """Seconds from t0 until Metadata lists the topic with a leader for every partition, and until a
    Fetch of partition 0 from offset 0 returns records. Polls every 5 ms on one connection."""
    conn: Conn | None = None
    meta: float | None = None
    while time.monotonic() < deadline:
        try:
            conn = conn or Conn("127.0.0.1", port, 2.0)
            if meta is None:
                r = conn.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                              allow_auto_topic_creation=False), 9, MetadataResponse)
                t = next((t for t in r.topics if t.name == topic), None)
                if t is not None and t.error_code == 0 and len(t.partitions) == parts and \
                        all(p.error_code == 0 and p.leader_id >= 0 for p in t.partitions):
                    meta = time.monotonic() - t0
            if meta is not None:
                r = conn.call(FetchRequest(
                    replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 16, isolation_level=0, session_id=0,
                    session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                        FetchRequest.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                               log_start_offset=-1, partition_max_bytes=1 << 16)])],
                    forgotten_topics_data=[], rack_id=""), 11, FetchResponse)
                p = r.responses[0].partitions[0]
                if p.error_code == 0 and p.records:
                    return meta, time.monotonic() - t0
        except (OSError, ConnectionError, RuntimeError):
            if conn is not None:
                conn.sock.close()
            conn = None
        time.sleep(0.005)
    raise TimeoutError("not served in time")


def timed_start(b: BrokerProc, topic: str, parts: int, timeout: float = 300) -> tuple[float, float]:
    """Start b and return (spawn -> Metadata answered, spawn -> first Fetch answered) in ms."""
    res: list[tuple[float, float] | BaseException] = []
    t0 = time.monotonic()

    def probe() -> None:
        try:
            res.append(_served(b.port, topic, parts, t0, t0 + timeout))
        except BaseException as exc:  # noqa: BLE001
            res.append(exc)
    th = threading.Thread(target=probe, daemon=True)
    th.start()
    b.start(timeout)
    th.join(timeout)
    if not res or isinstance(res[0], BaseException):
        raise RuntimeError(f"restart probe: {res[0] if res else 'timed out'}")
    meta, fetch = res[0]
    return meta * 1000, fetch * 1000


def restart_point(kind: str, parts: int, mb: int) -> Cell:
    """A fresh broker with one topic of `parts` partitions holding `mb` MB (contiguous blocks per
    partition); restart after SIGTERM, then after kill -9."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-restart-{kind}-"))
    b, out = BrokerProc(kind, work), {}
    try:
        b.start()
        topic, n = topic_name(f"sr{parts}"), mb * 1_000_000 // RECORD
        create_topic(b.bootstrap, topic, parts, timeout=300)
        produce_mbps(b.bootstrap, topic, n, part_of=lambda i: i * parts // n)
        b.stop()
        out["clean Metadata ms"], out["clean Fetch ms"] = timed_start(b, topic, parts)
        b.kill()
        out["kill -9 Metadata ms"], out["kill -9 Fetch ms"] = timed_start(b, topic, parts)
    finally:
        b.stop()
        shutil.rmtree(work, ignore_errors=True)
    return out


def run_points(kinds: list[str], points: Iterable[P], point: Callable[[str, P], Cell],
               timeout: float) -> list[tuple[P, dict[str, Cell]]]:
    """For each point, point(kind, p) for every kind in turn (guarded); prints as it goes."""
    rows = []
    for p in points:
        cells: dict[str, Cell] = {}
        for kind in kinds:
            with failure_label(f"{kind} at {p}"):
                cells[kind] = guarded("point", lambda: point(kind, p), timeout) or {}
            print(f"  {p} {kind}: " + ", ".join(f"{k}={v if v is None else round(v, 1)}"
                                                for k, v in cells[kind].items()), flush=True)
        rows.append((p, cells))
    return rows
