"""Traffic counters of one broker, for `/metrics` (broker/ops/metrics_collector.py, served by
broker/ops/admin_http.py). prometheus_client is imported only there, on the first scrape.

Two kinds of series, both produced at scrape time by `BrokerCollector` (a prometheus_client
custom Collector), so that the request path never builds label dicts or takes locks:
- **counters of traffic** kept as plain ints/lists in `BrokerMetrics`, bumped once per request
  (count, latency bucket, top-level error code) and once per partition of a Produce/Fetch (bytes and
  records, records from the batch headers' offsets, never per record);
- **gauges of state** (offsets, lag, partitions, transactions, groups, connections, request memory)
  read from the broker's objects when Prometheus scrapes; nothing keeps them up to date in between.

Invariant: a scrape only reads broker state on the event loop thread (the admin listener runs there),
so it sees a consistent view without locks.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Any

PREFIX = "minikafka_"
# request latency buckets, seconds (Prometheus' defaults shifted down: most requests take < 5 ms)
LATENCY_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1.0, 2.5, 5.0, 10.0, 30.0)
HANDLER_FAILED = "HANDLER_FAILED"  # error label of a request whose handler raised (connection closed)


class _ApiStats:
    """One API's counters. Lists of ints, indexed by latency bucket; a dict of error codes."""

    __slots__ = ("name", "count", "buckets", "seconds", "errors")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # last slot: above every bound (+Inf only)
        self.seconds = 0.0
        self.errors: dict[int | str, int] = {}


class BrokerMetrics:
    """Traffic counters of one broker; owned by BrokerState, read by BrokerCollector."""

    def __init__(self) -> None:
        self.apis: dict[int, _ApiStats] = {}
        # topic -> [bytes_in, records_in, bytes_out, records_out]
        self.topics: dict[str, list[int]] = {}
        self.connections_accepted = 0
        # (api name, error code) -> partitions answered with that error inside Produce/Fetch responses
        self.partition_errors: dict[tuple[str, int], int] = {}

    # -- hot path: O(1) per request / per partition -----------------------------------------
    def request_done(self, api_key: int, api_name: str, seconds: float, error: int | str) -> None:
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = _ApiStats(api_name)
        stats.count += 1
        stats.seconds += seconds
        stats.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        if error:
            stats.errors[error] = stats.errors.get(error, 0) + 1

    def partition_error(self, api_name: str, code: int) -> None:
        key = (api_name, code)
        self.partition_errors[key] = self.partition_errors.get(key, 0) + 1

    def _topic(self, topic: str) -> list[int]:
        c = self.topics.get(topic)
        if c is None:
            c = self.topics[topic] = [0, 0, 0, 0]
        return c

    def produced(self, topic: str, nbytes: int, records: int) -> None:
        c = self._topic(topic)
        c[0] += nbytes
        c[1] += records

    def fetched(self, topic: str, nbytes: int, records: int) -> None:
        c = self._topic(topic)
        c[2] += nbytes
        c[3] += records

    def forget_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)


def response_error(response: Any) -> int:
    """The top-level error code of a decoded response object (0 if it has none: fast-path bytes)."""
    if response.__class__ is bytearray:  # Produce's own encoding: per-partition codes only
        return 0
    code = getattr(response, "error_code", 0)
    return code if code.__class__ is int else 0
