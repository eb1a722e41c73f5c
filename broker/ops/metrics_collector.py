"""The prometheus_client Collector of every minikafka series (see broker/ops/metrics.py); imported on the
first scrape only, so that start-up does not pay for prometheus_client."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from minikafka.broker.ops.metrics import LATENCY_BUCKETS, PREFIX

if TYPE_CHECKING:
    from minikafka.broker.state import BrokerState


def _kafka_error_name(code: int | str) -> str:
    """Kafka's own spelling (NOT_COORDINATOR), from kafka-python's error class `message`."""
    if isinstance(code, str):
        return code
    import kafka.errors as ke
    cls = ke.kafka_errors.get(code)
    return getattr(cls, "message", None) or str(code)


class BrokerCollector(Collector):
    """Every minikafka series, read at scrape time from `state` and its `BrokerMetrics`."""

    def __init__(self, state: "BrokerState", ready: Any = None) -> None:
        self.state = state
        self.ready = ready  # () -> bool

    def describe(self) -> list:  # no eager collect at registration
        return []

    def collect(self) -> Iterator[Any]:
        yield from self._requests()
        yield from self._topics()
        yield from self._broker()
        yield from self._partitions()
        yield from self._transactions()
        yield from self._groups()
        yield from self._schema_registry()
        yield from self._client_telemetry()
        yield from self._client_quotas()

    # -- client quotas (Kafka's Produce/Fetch/Request throttle-time and byte-rate per quota entity) --------
    def _client_quotas(self) -> Iterable[Any]:
        quotas = getattr(self.state, "quotas", None)
        if quotas is None:
            return
        labels = ["type", "user", "client_id"]
        throttle = CounterMetricFamily(PREFIX + "client_quota_throttle_time_ms",
                                       "Milliseconds of throttling given to a quota entity's requests", labels=labels)
        throttled = CounterMetricFamily(PREFIX + "client_quota_throttled_requests",
                                        "Responses that carried a throttle time, by quota entity", labels=labels)
        recorded = CounterMetricFamily(PREFIX + "client_quota_recorded",
                                       "Usage recorded against a quota (bytes; request time as percent-seconds; "
                                       "partitions mutated)", labels=labels)
        rate = GaugeMetricFamily(PREFIX + "client_quota_byte_rate",
                                 "Bytes per second over the quota window, by quota entity (produce, fetch)",
                                 labels=labels)
        for key, ms in list(quotas.throttle_ms_total.items()):
            throttle.add_metric(list(key), ms)
        for key, n in list(quotas.throttled_total.items()):
            throttled.add_metric(list(key), n)
        for key, v in list(quotas.recorded_total.items()):
            recorded.add_metric(list(key), v)
        for key, v in quotas.byte_rates().items():
            rate.add_metric(list(key), v)
        yield from (throttle, throttled, recorded, rate)

    # -- traffic ------------------------------------------------------------------------------
    def _requests(self) -> Iterable[Any]:
        m = self.state.metrics
        req = CounterMetricFamily(PREFIX + "requests", "Requests answered (or failed), by API", labels=["api"])
        err = CounterMetricFamily(PREFIX + "request_errors", "Requests whose response carried a top-level "
                                  "error code, or whose handler failed, by API and error", labels=["api", "error"])
        lat = HistogramMetricFamily(PREFIX + "request_latency_seconds",
                                    "Time from a request's decoding to its response, by API", labels=["api"])
        perr = CounterMetricFamily(PREFIX + "partition_errors", "Partitions answered with an error inside "
                                   "Produce and Fetch responses (whose top-level error is none), by API and error",
                                   labels=["api", "error"])
        for (api, code), n in sorted(m.partition_errors.items()):
            perr.add_metric([api, _kafka_error_name(code)], n)
        for stats in sorted(m.apis.values(), key=lambda s: s.name):
            req.add_metric([stats.name], stats.count)
            for code, n in sorted(stats.errors.items(), key=lambda kv: str(kv[0])):
                err.add_metric([stats.name, _kafka_error_name(code)], n)
            cumulative, buckets = 0, []
            for bound, n in zip(LATENCY_BUCKETS, stats.buckets):
                cumulative += n
                buckets.append((repr(bound), cumulative))
            buckets.append(("+Inf", stats.count))
            lat.add_metric([stats.name], buckets, stats.seconds)
        return (req, err, lat, perr)

    def _topics(self) -> Iterable[Any]:
        m = self.state.metrics
        fams = [CounterMetricFamily(PREFIX + name, doc, labels=["topic"]) for name, doc in (
            ("bytes_in", "Record bytes appended by Produce, by topic"),
            ("records_in", "Records appended by Produce (from batch headers), by topic"),
            ("bytes_out", "Record bytes returned by Fetch, by topic"),
            ("records_out", "Offsets spanned by the batches Fetch returned (from batch headers), by topic"))]
        catalog = self.state.catalog
        for topic in [t for t in m.topics if catalog.get(t) is None]:
            m.forget_topic(topic)  # deleted: its series go (a topic created again starts from 0)
        for topic, counts in sorted(m.topics.items()):
            for fam, value in zip(fams, counts):
                fam.add_metric([topic], value)
        return fams

    # -- state ----------------------------------------------------------------------------------
    def _broker(self) -> Iterable[Any]:
        state = self.state
        up = GaugeMetricFamily(PREFIX + "ready", "1 once start-up recovery finished and the listeners are up")
        up.add_metric([], 1.0 if self.ready is None or self.ready() else 0.0)
        yield up
        conns = GaugeMetricFamily(PREFIX + "connections", "Open client connections")
        reg = state.connections
        conns.add_metric([], float(reg.count if reg is not None else 0))
        yield conns
        pool = state.memory_pool
        g = GaugeMetricFamily(PREFIX + "request_memory_in_use_bytes",
                              "Bytes of requests being read or handled (the request memory pool)")
        g.add_metric([], float(pool.in_use))
        yield g
        g = GaugeMetricFamily(PREFIX + "request_memory_capacity_bytes",
                              "Request memory pool size (queued.max.request.bytes)")
        g.add_metric([], float(pool.capacity))
        yield g
        g = GaugeMetricFamily(PREFIX + "start_time_seconds", "Broker start time, seconds since the epoch")
        g.add_metric([], float(state.started_at))
        yield g

    def _partitions(self) -> Iterable[Any]:
        logs = self.state.logs
        count = GaugeMetricFamily(PREFIX + "partitions", "Partitions this broker holds (opened or not)")
        count.add_metric([], float(logs.partition_count))
        unopened = GaugeMetricFamily(PREFIX + "partitions_unopened",
                                     "Partitions whose log is not opened (recovered) yet")
        unopened.add_metric([], float(len(logs.unopened())))
        labels = ["topic", "partition"]
        size = GaugeMetricFamily(PREFIX + "log_size_bytes", "Bytes of a partition's segments", labels=labels)
        start = GaugeMetricFamily(PREFIX + "log_start_offset", "Log start offset", labels=labels)
        end = GaugeMetricFamily(PREFIX + "log_end_offset", "Log end offset", labels=labels)
        hw = GaugeMetricFamily(PREFIX + "high_watermark", "High watermark", labels=labels)
        lso = GaugeMetricFamily(PREFIX + "last_stable_offset", "Last stable offset", labels=labels)
        producers = GaugeMetricFamily(PREFIX + "active_producer_ids",
                                      "Producer ids with state in the partition (idempotent/transactional)",
                                      labels=labels)
        for topic, partition in sorted(logs.partitions()):
            plog = logs.opened(topic, partition)
            if plog is None:
                continue  # not recovered yet: no offsets to show
            lv = [topic, str(partition)]
            size.add_metric(lv, float(plog.size_bytes))
            start.add_metric(lv, float(plog.log_start_offset))
            end.add_metric(lv, float(plog.log_end_offset))
            hw.add_metric(lv, float(plog.high_watermark))
            lso.add_metric(lv, float(plog.last_stable_offset))
            producers.add_metric(lv, float(len(plog.active_producers())))
        return (count, unopened, size, start, end, hw, lso, producers)

    def _transactions(self) -> Iterable[Any]:
        from_state = self.state
        ongoing = GaugeMetricFamily(PREFIX + "transactions", "Transactional ids by transaction state",
                                    labels=["state"])
        oldest = GaugeMetricFamily(PREFIX + "transaction_oldest_age_seconds",
                                   "Age of the oldest transaction not completed yet (0 if none)")
        _groups_built, txns_built = from_state.coordinators_built()
        counts: dict[str, int] = {}
        age = 0.0
        if txns_built:
            now_ms = time.time() * 1000
            for meta in from_state.txns.txns.all_metadata():
                name = meta.state.kafka_name
                counts[name] = counts.get(name, 0) + 1
                if name in ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence") and meta.start_ms >= 0:
                    age = max(age, (now_ms - meta.start_ms) / 1000)
        for name, n in sorted(counts.items()):
            ongoing.add_metric([name], float(n))
        oldest.add_metric([], age)
        return (ongoing, oldest)

    def _groups(self) -> Iterable[Any]:
        state = self.state
        groups = GaugeMetricFamily(PREFIX + "groups", "Consumer groups by protocol and state",
                                   labels=["protocol", "state"])
        members = GaugeMetricFamily(PREFIX + "group_members", "Members of a group", labels=["group"])
        committed = GaugeMetricFamily(PREFIX + "group_committed_offset", "Committed offset by group and partition",
                                      labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily(PREFIX + "consumer_lag", "High watermark minus committed offset, by group and "
                                "partition", labels=["group", "topic", "partition"])
        groups_built, _txns_built = state.coordinators_built()
        if groups_built:
            coord = state.groups
            by_state: dict[tuple[str, str], int] = {}
            for gid, g in sorted(coord.groups.items()):
                key = ("classic", str(getattr(g.state, "name", g.state)))
                by_state[key] = by_state.get(key, 0) + 1
                members.add_metric([gid], float(len(g.members)))
            for gid, g in sorted(coord.consumer.groups.items()):
                key = ("consumer", str(getattr(getattr(g, "state", None), "name", "UNKNOWN")))
                by_state[key] = by_state.get(key, 0) + 1
                members.add_metric([gid], float(len(g.members)))
            for (proto, st), n in sorted(by_state.items()):
                groups.add_metric([proto, st], float(n))
            logs = state.logs
            for gid in sorted(coord.offsets.groups()):
                for topic, partition, value in sorted(coord.offsets.partitions(gid), key=lambda t: (t[0], t[1])):
                    lv = [gid, topic, str(partition)]
                    committed.add_metric(lv, float(value.offset))
                    plog = logs.opened(topic, partition)
                    if plog is not None:
                        lag.add_metric(lv, float(max(plog.high_watermark - value.offset, 0)))
        return (groups, members, committed, lag)

    def _schema_registry(self) -> Iterable[Any]:
        """The built-in Schema Registry's counters (schema_registry/metrics.py), while its listener runs."""
        m = self.state.schema_registry_metrics
        if m is None:
            return ()
        sr = PREFIX + "schema_registry_"
        requests = CounterMetricFamily(sr + "requests", "Schema Registry requests answered, by endpoint family "
                                       "and status class", labels=["endpoint", "status"])
        for (family, status), n in sorted(m.requests.items()):
            requests.add_metric([family, status], n)
        registered = CounterMetricFamily(sr + "schemas_registered", "Registrations that created a subject version")
        registered.add_metric([], m.schemas_registered)
        rejected = CounterMetricFamily(sr + "compatibility_rejections", "Schemas found incompatible: by "
                                       "registrations (409) and compatibility checks", labels=["request"])
        for request, n in sorted(m.compatibility_rejections.items()):
            rejected.add_metric([request], n)
        unauthenticated = CounterMetricFamily(sr + "authentication_failures", "Requests answered 401")
        unauthenticated.add_metric([], m.authentication_failures)
        denied = CounterMetricFamily(sr + "authorization_denials", "Requests answered 403 (40301)")
        denied.add_metric([], m.authorization_denials)
        fams = [requests, registered, rejected, unauthenticated, denied]
        for name, value in m.gauges().items():
            g = GaugeMetricFamily(sr + name, {"subjects": "Subjects with a live version",
                                              "schema_ids": "Schema ids registered",
                                              "versions": "Live subject versions"}.get(name, name))
            g.add_metric([], float(value))
            fams.append(g)
        return fams

    def _client_telemetry(self) -> Iterable[Any]:
        """Metrics that clients push (KIP-714, broker/ops/client_telemetry.py), once one has pushed."""
        telemetry = getattr(self.state, "_client_telemetry", None)
        if telemetry is None:
            return ()
        from minikafka.broker.ops.client_telemetry import metric_families
        return metric_families(telemetry)


def make_registry(state: "BrokerState", ready: Any = None) -> CollectorRegistry:
    """A registry of its own (not prometheus_client's global one: several brokers may share a process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(state, ready))
    return registry
