"""Client telemetry (KIP-714): Kafka's ClientMetricsManager, and the metrics that clients push.

Subscriptions are the CLIENT_METRICS config resources (broker/config/client_metrics_configs.py). A
client asks GetTelemetrySubscriptions with the zero uuid and is given a client instance id; its
subscription is the union of the matching subscriptions' metric prefixes (`*` alone when one of them
asks for all), the lowest of their push intervals (Kafka's 5 minutes when none matches, with no
metrics: the empty subscription), and a subscription id, the CRC-32C of that set and interval XOR the
instance id's hash. When the subscriptions change, an instance is re-evaluated on its next request.

Rate and validity are Kafka's: a GetTelemetrySubscriptions sooner than the push interval after the
last request, or a PushTelemetry sooner than the interval after the previous one (the first push
after a Get is always taken; a terminating push too) is THROTTLING_QUOTA_EXCEEDED; after a
terminating push every push is INVALID_REQUEST; a push naming another subscription id is
UNKNOWN_SUBSCRIPTION_ID, an unknown codec UNSUPPORTED_COMPRESSION_TYPE, more than
`telemetry.max.bytes` TELEMETRY_TOO_LARGE.

Beyond Kafka (no Kafka broker exports them without a plugin): the pushed payload, an OTLP MetricsData
(ExportMetricsServiceRequest has the same wire form), possibly compressed, is decoded in a worker
thread and its data points are kept as series labelled with client_instance_id, client_id and the
point's attributes, read by /metrics (broker/ops/metrics_collector.py). Bounded: at most
MAX_SERIES_PER_CLIENT series per client, MAX_SERIES in all, MAX_CLIENTS clients, MAX_ATTRIBUTES labels of
MAX_TEXT characters; a client's series go once it has not
pushed for EXPIRY_INTERVALS push intervals. A payload that does not decode is INVALID_RECORD, as Kafka
answers when its receiver plugin fails.
"""
from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import crc32c
import kafka.errors as ke

from minikafka.broker.config.client_metrics_configs import ALL_METRICS, DEFAULT_INTERVAL_MS, ClientMetricsConfigStore
from minikafka.protocol import errors as kafka_errors

log = logging.getLogger(__name__)

ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]  # zstd, lz4, gzip, snappy (Kafka's order)
KNOWN_COMPRESSION_TYPES = frozenset({0, 1, 2, 3, 4})
DEFAULT_TELEMETRY_MAX_BYTES = 1024 * 1024
CACHE_MAX_SIZE = 16384  # client instances kept (Kafka's LRU size)
CACHE_EXPIRY_MS = 60_000  # an instance is forgotten max(this, 3 x its interval) after its last request
MAX_CLIENTS = 1000  # clients whose pushed series /metrics shows
MAX_SERIES_PER_CLIENT = 1000
MAX_SERIES = 100_000  # over every client
MAX_ATTRIBUTES = 16  # attributes (labels) kept per data point
MAX_TEXT = 256  # characters kept of a metric name, an attribute name or value
EXPIRY_INTERVALS = 3  # a client's series go when it has not pushed for this many push intervals
INFLATE_FACTOR = 16  # a compressed payload inflates to at most this many times telemetry.max.bytes

NONE = kafka_errors.NONE
THROTTLED = ke.ThrottlingQuotaExceededError.errno
INVALID_REQUEST = ke.InvalidRequestError.errno
UNKNOWN_SUBSCRIPTION_ID = kafka_errors.UNKNOWN_SUBSCRIPTION_ID
TELEMETRY_TOO_LARGE = kafka_errors.TELEMETRY_TOO_LARGE
UNSUPPORTED_COMPRESSION_TYPE = ke.UnsupportedCompressionTypeError.errno
INVALID_RECORD = kafka_errors.INVALID_RECORD
RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})


def kafka_uuid_text(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded (what clients and tools show)."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def java_uuid_hash(u: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode, as a signed int32."""
    msb, lsb = u.int >> 64, u.int & (2**64 - 1)
    h = msb ^ lsb
    v = ((h >> 32) ^ h) & 0xFFFFFFFF
    return v - 2**32 if v >= 2**31 else v


def subscription_id(metrics: Iterable[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC-32C of the metric set's text and the interval, XOR the id's hash."""
    text = ("[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)).encode()
    crc = crc32c.crc32c(text)
    v = ((crc - 2**32 if crc >= 2**31 else crc) ^ java_uuid_hash(instance_id)) & 0xFFFFFFFF
    return v - 2**32 if v >= 2**31 else v


def new_instance_id(taken: Callable[[uuid.UUID], bool]) -> uuid.UUID:
    """Kafka's Uuid.randomUuid: not reserved, not starting with '-' in base64, not in use."""
    while True:
        u = uuid.UUID(bytes=os.urandom(16))
        if u not in RESERVED_IDS and (u.bytes[0] >> 2) != 62 and not taken(u):
            return u


@dataclass(slots=True)
class Instance:
    id: uuid.UUID
    attributes: dict[str, str | None]
    subscription_id: int
    version: int
    metrics: list[str]
    interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False
    last_error: int = NONE
    last_seen_ms: int = 0
    peer: str = ""  # the connection it was made on (Kafka forgets it when that connection closes)


@dataclass(slots=True)
class ClientSeries:
    """What one client pushed: (metric name, kind, label items) -> value; kind is 'gauge' or 'counter'."""
    client_id: str
    interval_ms: int
    last_push: float
    series: dict[tuple[str, str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)
    dropped: int = 0  # data points refused by the per-client cap


class ClientTelemetry:
    def __init__(self, store: ClientMetricsConfigStore, max_bytes: int = DEFAULT_TELEMETRY_MAX_BYTES,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self.clock = clock
        self.version = 0  # bumped on every subscription change: instances re-evaluate when behind
        self.instances: OrderedDict[uuid.UUID, Instance] = OrderedDict()
        self.by_connection: dict[str, uuid.UUID] = {}  # peer -> the instance last created on it (bounded with instances)
        self.clients: OrderedDict[str, ClientSeries] = OrderedDict()  # instance id text -> pushed series
        self.pushes = 0
        self.decode_errors = 0
        self.series_count = 0  # series held over every client (MAX_SERIES)
        store.on_change(self._subscriptions_changed)

    def _subscriptions_changed(self) -> None:
        self.version += 1

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- instances ------------------------------------------------------------------------------
    def _evaluate(self, instance_id: uuid.UUID, attributes: dict[str, str | None]) -> Instance:
        interval, metrics, everything = DEFAULT_INTERVAL_MS, set(), False
        for sub in self.store.active():
            if sub.matches(attributes):
                everything = everything or ALL_METRICS in sub.metrics
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        if everything:
            metrics = {ALL_METRICS}
        return Instance(instance_id, attributes, subscription_id(metrics, interval, instance_id), self.version,
                        sorted(metrics), interval)

    def _instance(self, instance_id: uuid.UUID, client_id: str | None, peer: str,
                  software: tuple[str, str] | None = None) -> Instance:
        now = self._now_ms()
        self._expire(now)
        inst = self.instances.get(instance_id)
        address, port = split_peer(peer)
        if inst is None:
            attributes = {"client_instance_id": kafka_uuid_text(instance_id), "client_id": client_id,
                          "client_software_name": software[0] if software else None,
                          "client_software_version": software[1] if software else None,
                          "client_source_address": address, "client_source_port": port}
            inst = self._evaluate(instance_id, attributes)
            self._put(inst, peer)
        elif inst.version < self.version:  # the subscriptions changed: a new instance, as Kafka's
            inst = self._evaluate(instance_id, inst.attributes)
            self._put(inst, peer)
        self.instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        return inst

    def _put(self, inst: Instance, peer: str) -> None:
        self.instances[inst.id] = inst
        inst.peer = peer
        self.by_connection[peer] = inst.id
        while len(self.instances) > CACHE_MAX_SIZE:
            self._drop(next(iter(self.instances)))

    def _drop(self, instance_id: uuid.UUID) -> None:
        inst = self.instances.pop(instance_id, None)
        if inst is not None and self.by_connection.get(inst.peer) == instance_id:
            del self.by_connection[inst.peer]

    def connection_closed(self, peer: str) -> None:
        """Kafka's disconnect listener: the instance created on this connection is forgotten (a client
        that reconnects with its id starts afresh: not throttled)."""
        instance_id = self.by_connection.pop(peer, None)
        if instance_id is not None:
            self.instances.pop(instance_id, None)

    def _expire(self, now: int) -> None:
        while self.instances:
            first = next(iter(self.instances.values()))
            if now - first.last_seen_ms < max(CACHE_EXPIRY_MS, 3 * first.interval_ms):
                break
            self._drop(first.id)

    # -- the two APIs ---------------------------------------------------------------------------
    def get_subscriptions(self, instance_id: uuid.UUID | None, client_id: str | None, peer: str,
                          software: tuple[str, str] | None = None) -> tuple[int, Instance | None]:
        """(error code, the instance) for GetTelemetrySubscriptions; a zero/absent id gets a new one."""
        if instance_id is None or instance_id.int == 0:
            instance_id = new_instance_id(lambda u: u in self.instances)
        inst = self._instance(instance_id, client_id, peer, software)
        now = self._now_ms()
        if now - max(inst.last_get_ms, inst.last_push_ms) >= inst.interval_ms:
            inst.last_get_ms = now
        else:  # Kafka throttles whatever the last error was (its condition is always true)
            return THROTTLED, inst
        inst.last_error = NONE
        return NONE, inst

    def check_push(self, instance_id: uuid.UUID | None, client_id: str | None, peer: str, subscription: int,
                   terminating: bool, compression: int, size: int,
                   software: tuple[str, str] | None = None) -> tuple[int, Instance | None]:
        """Kafka's validatePushRequest: the error of a PushTelemetry (NONE: accepted; then `export`)."""
        if instance_id is None or instance_id in RESERVED_IDS:
            return INVALID_REQUEST, None
        inst = self._instance(instance_id, client_id, peer, software)
        now = self._now_ms()
        try:
            if inst.terminating:
                return self._failed(inst, INVALID_REQUEST)
            accept = inst.last_get_ms > inst.last_push_ms or now - inst.last_push_ms >= inst.interval_ms
            if accept:
                inst.last_push_ms = now
            elif not terminating:
                return self._failed(inst, THROTTLED)
            if subscription != inst.subscription_id:
                return self._failed(inst, UNKNOWN_SUBSCRIPTION_ID)
            if compression not in KNOWN_COMPRESSION_TYPES:
                return self._failed(inst, UNSUPPORTED_COMPRESSION_TYPE)
            if size > self.max_bytes:
                return self._failed(inst, TELEMETRY_TOO_LARGE)
        finally:
            inst.terminating = terminating
        inst.last_error = NONE
        return NONE, inst

    @staticmethod
    def _failed(inst: Instance, code: int) -> tuple[int, Instance]:
        inst.last_error = code
        return code, inst

    async def export(self, inst: Instance, client_id: str | None, compression: int, payload: bytes) -> int:
        """Decode a pushed payload (worker thread) and keep its series; INVALID_RECORD when it does not decode."""
        if not payload:
            return NONE
        cap = self.max_bytes * INFLATE_FACTOR
        try:
            points = await asyncio.to_thread(decode_metrics, payload, compression, cap)
        except Exception as exc:  # noqa: BLE001 -- any malformed payload
            log.debug("client %s pushed metrics that do not decode: %s", inst.id, exc)
            self.decode_errors += 1
            inst.last_error = INVALID_RECORD
            return INVALID_RECORD
        self._keep(inst, client_id or "", points)
        self.pushes += 1
        return NONE

    def _keep(self, inst: Instance, client_id: str, points: list[tuple[str, str, dict[str, str], float]]) -> None:
        key = kafka_uuid_text(inst.id)
        entry = self.clients.get(key)
        if entry is None:
            entry = self.clients[key] = ClientSeries(client_id, inst.interval_ms, self.clock())
            while len(self.clients) > MAX_CLIENTS:
                self.series_count -= len(self.clients.popitem(last=False)[1].series)
        self.clients.move_to_end(key)
        entry.client_id, entry.interval_ms, entry.last_push = client_id, inst.interval_ms, self.clock()
        for name, kind, attrs, value in points:
            labels = tuple(sorted((k, v) for k, v in attrs.items() if k not in ("client_instance_id", "client_id")))
            cumulative = kind == "counter_cumulative"
            skey = (name, "counter" if cumulative else kind, labels)
            if skey not in entry.series:
                if len(entry.series) >= MAX_SERIES_PER_CLIENT or self.series_count >= MAX_SERIES:
                    entry.dropped += 1
                    continue
                self.series_count += 1
            if kind == "counter":  # sums are pushed as deltas (DeltaTemporality): accumulated here
                entry.series[skey] = entry.series.get(skey, 0.0) + value
            else:
                entry.series[skey] = value

    def snapshot(self) -> list[tuple[str, ClientSeries]]:
        """(client instance id as Kafka writes it, its series) for a scrape, after dropping the clients that stopped pushing."""
        now = self.clock()
        for key in [k for k, c in self.clients.items()
                    if now - c.last_push > EXPIRY_INTERVALS * c.interval_ms / 1000]:
            self.series_count -= len(self.clients.pop(key).series)
        return list(self.clients.items())


def split_peer(peer: str) -> tuple[str | None, str | None]:
    host, sep, port = peer.rpartition(":")
    if not sep:
        return peer or None, None
    return host.strip("[]") or None, port or None


# -- OTLP decoding -----------------------------------------------------------------------------------
def _inflate(payload: bytes, compression: int, cap: int) -> bytes:
    if compression == 0:
        return payload
    from minikafka.protocol.record_validator import _DECOMPRESS  # the batch codecs, bounded by `cap`
    return bytes(_DECOMPRESS[compression](memoryview(payload), cap))


def _attr_value(v) -> str:
    kind = v.WhichOneof("value")
    if kind is None:
        return ""
    val = getattr(v, kind)
    if kind == "bool_value":
        return "true" if val else "false"
    return str(val)[:MAX_TEXT]


def _attrs(kvs) -> dict[str, str]:
    return {kv.key[:MAX_TEXT]: _attr_value(kv.value) for kv in list(kvs)[:MAX_ATTRIBUTES]}


def decode_metrics(payload: bytes, compression: int, cap: int) -> list[tuple[str, str, dict[str, str], float]]:
    """(metric name, 'gauge' | 'counter' | 'counter_cumulative', attributes, value) of every data point of an
    OTLP MetricsData.
    Gauges and non-monotonic sums are gauges; monotonic sums counters; histograms and summaries give
    their `_count` and `_sum` (counters)."""
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData
    data = MetricsData()
    data.ParseFromString(_inflate(payload, compression, cap))
    out: list[tuple[str, str, dict[str, str], float]] = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                if kind == "gauge" or kind == "sum":
                    body = getattr(m, kind)
                    counter = kind == "sum" and body.is_monotonic
                    # a monotonic sum pushed as deltas is accumulated; a cumulative one (temporality 2) is taken as is
                    what = ("counter" if body.aggregation_temporality != 2 else "counter_cumulative") if counter \
                        else "gauge"
                    for p in body.data_points:
                        value = p.as_double if p.WhichOneof("value") == "as_double" else float(p.as_int)
                        out.append((m.name[:MAX_TEXT], what, _attrs(p.attributes), value))
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    for p in getattr(m, kind).data_points:
                        attrs = _attrs(p.attributes)
                        out.append((m.name[:MAX_TEXT] + ".count", "counter", attrs, float(p.count)))
                        out.append((m.name[:MAX_TEXT] + ".sum", "counter", attrs, float(p.sum)))
    return out


_NAME_BAD = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(name: str) -> str:
    """A metric or label name Prometheus accepts: other characters become '_', never a leading digit."""
    out = _NAME_BAD.sub("_", name)
    return out if out and not out[0].isdigit() else "_" + out


CLIENT_PREFIX = "minikafka_client_"


def metric_families(telemetry: "ClientTelemetry | None") -> list:
    """The pushed client metrics as prometheus_client families (read at scrape time): one family per
    metric name (`minikafka_client_` + the OTLP name with '.' as '_'), labelled client_instance_id,
    client_id and the data point's attributes; plus the manager's own counters."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    if telemetry is None:
        return []
    families: dict[str, Any] = {}
    kinds: dict[str, str] = {}
    for instance_id, client in telemetry.snapshot():
        for (name, kind, labels), value in client.series.items():
            pname = CLIENT_PREFIX + prometheus_name(name)
            if kinds.setdefault(pname, kind) != kind:
                continue  # the same name pushed as a gauge by one client and a counter by another: the first wins
            names = ["client_instance_id", "client_id"] + [prometheus_name(k) for k, _ in labels]
            if len(set(names)) != len(names):
                continue  # two attributes that only differ in characters Prometheus does not take
            key = pname + "|" + ",".join(names)
            fam = families.get(key)
            if fam is None:
                if key.split("|")[0] in {k.split("|")[0] for k in families}:
                    continue  # one family per name: another label set of this name came first
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                fam = families[key] = cls(pname, f"Client metric {name} (KIP-714 push)", labels=names)
            fam.add_metric([instance_id, client.client_id] + [v for _, v in labels], value)
    pushes = CounterMetricFamily("minikafka_client_telemetry_pushes", "PushTelemetry requests whose metrics were kept")
    pushes.add_metric([], telemetry.pushes)
    bad = CounterMetricFamily("minikafka_client_telemetry_decode_errors",
                              "PushTelemetry payloads that did not decode (answered INVALID_RECORD)")
    bad.add_metric([], telemetry.decode_errors)
    return [*families.values(), pushes, bad]
