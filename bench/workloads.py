"""The benchmark workloads, librdkafka (confluent-kafka) clients, 1 KiB records.

Every workload bounds its own waits; `guarded` adds an overall deadline and turns a failure into
None (reported as n/a) so one broken workload does not stop a benchmark run.
"""
from __future__ import annotations

import contextlib
import json
import signal
import statistics
import threading
import time
from typing import Callable, Iterator, TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .common import rss_mb

RECORD = 1024
PAYLOAD = b"x" * RECORD
T = TypeVar("T")
FAILURES: list[str] = []  # what `guarded` turned into n/a, for the report


def guarded(name: str, fn: Callable[[], T], timeout: float) -> T | None:
    """fn() under a SIGALRM deadline (nests: never past an enclosing one); an exception or timeout is
    printed and gives None."""
    def on_alarm(_sig: int, _frame: object) -> None:
        raise TimeoutError(f"over {timeout:.0f} s")
    t0 = time.monotonic()
    outer = signal.getitimer(signal.ITIMER_REAL)[0]
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, min(timeout, outer) if outer else timeout)
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - any failure becomes n/a
        print(f"  ! {name} failed: {exc!r}", flush=True)
        FAILURES.append(f"{name}: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}")
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, outer - (time.monotonic() - t0)))


@contextlib.contextmanager
def failure_label(label: str) -> Iterator[None]:
    """Prefix the failures recorded inside the block with `label` (broker, round, point)."""
    mark = len(FAILURES)
    try:
        yield
    finally:
        FAILURES[mark:] = [f"{label}, {f}" for f in FAILURES[mark:]]


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def create_topic(bs: str, topic: str, partitions: int, timeout: float = 120) -> float:
    """Create a topic and wait until every partition has a leader in metadata; returns the seconds."""
    t0 = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=timeout).values():
        f.result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions \
                and all(p.leader >= 0 and p.error is None for p in t.partitions.values()):
            return time.monotonic() - t0
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} not ready")


def _produce_all(p: Producer, topic: str, n: int, part_of: Callable[[int], int] | None) -> None:
    for i in range(n):
        while True:
            try:
                if part_of is None:
                    p.produce(topic, PAYLOAD)
                else:
                    p.produce(topic, PAYLOAD, partition=part_of(i))
                break
            except BufferError:
                p.poll(0.005)
    left = p.flush(60 + n * RECORD / 1e6)  # gives up below ~1 MB/s
    if left:
        raise RuntimeError(f"{left} records not acknowledged")


def produce_mbps(bs: str, topic: str, n: int, idempotent: bool = False,
                 part_of: Callable[[int], int] | None = None, before: Callable[[], object] = lambda: None) -> float:
    """acks=all, linger 5 ms, 1 MB batches; part_of(i) = partition of record i, None: librdkafka's
    default partitioner. before() runs after the warm-up record, just before the timed part."""
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": idempotent})
    p.produce(topic, PAYLOAD, partition=0)  # connection and metadata outside the timed part
    p.flush(30)
    before()
    t0 = time.perf_counter()
    _produce_all(p, topic, n, part_of)
    return n * RECORD / 1e6 / (time.perf_counter() - t0)


def consume_mbps(bs: str, topic: str, partitions: int | list[int], n: int, read_committed: bool = True,
                 before: Callable[[], object] = lambda: None) -> float:
    """Read n records from offset 0 of the partitions (assign, no group); partitions=k: 0..k-1.
    Connection and metadata come before before() and the timed part."""
    parts = list(range(partitions)) if isinstance(partitions, int) else partitions
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench", "enable.auto.commit": False,
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                  "fetch.max.bytes": 52_428_800,
                  # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) whenever more than
                  # queued.max.messages.kbytes (64 MB) wait in its queue: a broker faster than the Python
                  # loop then reads as a 1 s stall. With room for the whole read the client never backs off.
                  "queued.max.messages.kbytes": 1_048_576})
    try:
        c.list_topics(topic, timeout=30)
        before()
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        got, t0 = 0, time.perf_counter()
        while got < n:
            msgs = c.consume(min(10_000, n - got), 10.0)  # returns once that many are there
            if not msgs:
                raise RuntimeError(f"consumer stalled at {got}/{n}")
            got += sum(1 for m in msgs if not m.error())
        return n * RECORD / 1e6 / (time.perf_counter() - t0)
    finally:
        c.close()


def paced(n: int, rate: float, send: Callable[[int], None]) -> None:
    """send(i) for i < n at `rate` calls per second."""
    t0 = time.perf_counter()
    for i in range(n):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(i)


def ack_latencies(bs: str, topic: str, partitions: int, seconds: float, mbps: float,
                  before: Callable[[], object] = lambda: None) -> tuple[list[float], int]:
    """Produce at a fixed rate (round robin over partitions, acks=all, librdkafka's default linger
    5 ms): (per-record latency from produce() to its delivery report, i.e. librdkafka's
    msg.latency(), in seconds; Produce requests sent, from librdkafka's statistics)."""
    lat: list[float] = []
    requests = [0]

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            lat.append(msg.latency())  # type: ignore[attr-defined]

    def on_stats(js: str) -> None:
        brokers = json.loads(js)["brokers"].values()
        requests[0] = sum(b["req"].get("Produce", 0) for b in brokers if b["nodeid"] >= 0)
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "on_delivery": on_delivery,
                  "statistics.interval.ms": 100, "stats_cb": on_stats})
    p.produce(topic, PAYLOAD, partition=0)
    p.flush(30)
    p.poll(0.25)
    lat.clear()
    before()
    rate = mbps * 1e6 / RECORD
    n = int(rate * seconds)
    sent_before = requests[0]

    def send(i: int) -> None:
        p.produce(topic, PAYLOAD, partition=i % partitions)
        p.poll(0)
    paced(n, rate, send)
    if p.flush(60):
        raise RuntimeError("records not acknowledged")
    p.poll(0.25)
    if len(lat) < n:
        raise RuntimeError(f"only {len(lat)}/{n} delivered")
    return lat, requests[0] - sent_before


def e2e_p99_ms(bs: str, topic: str, seconds: float = 5.0, mbps: float = 10.0) -> float:
    """1 KiB records at a fixed rate to one partition; p99 of (consume time - send time), ms."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-e2e", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 1})
    rate = mbps * 1e6 / RECORD
    n = int(rate * seconds)
    latencies: list[float] = []
    done = threading.Event()
    try:
        # The measured window starts once a first record made the whole trip.
        p.produce(topic, b"warmup")
        p.flush(30)
        deadline = time.time() + 30
        while not any(not m.error() for m in c.consume(10, 0.5)):
            if time.time() > deadline:
                raise TimeoutError("warm-up record never arrived")

        def consume() -> None:  # poll() returns as soon as one record is there
            while len(latencies) < n and not done.is_set():
                m = c.poll(0.1)
                if m is not None and not m.error() and m.value() != b"warmup":
                    latencies.append(time.time() - float(m.value()[:20]))
        t = threading.Thread(target=consume, daemon=True)
        t.start()
        pad = b"x" * (RECORD - 20)

        def send(_i: int) -> None:
            p.produce(topic, b"%20.6f" % time.time() + pad)
            p.poll(0)
        paced(n, rate, send)
        p.flush(60)
        t.join(30)
    finally:
        done.set()
        c.close()
    if len(latencies) < n * 0.99:
        raise RuntimeError(f"only {len(latencies)}/{n} records arrived")
    return p99(latencies) * 1000


def transactions(bs: str, topic: str, count: int = 300, linger_ms: int | None = 0) -> tuple[float, float]:
    """(transactions/s, commit p99 ms): 10 records of 100 B over 3 partitions per transaction,
    after 3 warm-up transactions; linger_ms None: librdkafka's default."""
    config: dict[str, object] = {"bootstrap.servers": bs, "transactional.id": f"bench-{time.time_ns()}"}
    if linger_ms is not None:
        config["linger.ms"] = linger_ms
    p = Producer(config)
    p.init_transactions(30)
    commits: list[float] = []
    t0 = 0.0
    for k in range(count + 3):
        if k == 3:
            t0 = time.perf_counter()
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, b"x" * 100, partition=i % 3)
        c0 = time.perf_counter()
        p.commit_transaction(30)
        if k >= 3:
            commits.append(time.perf_counter() - c0)
    return count / (time.perf_counter() - t0), p99(commits) * 1000


class RssSampler:
    """Peak RSS (MB) of a process, sampled every 100 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return

    def __enter__(self) -> "RssSampler":
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
