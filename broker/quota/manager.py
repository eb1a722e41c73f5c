"""Enforcement of client quotas (Kafka's ClientQuotaManager, ClientRequestQuotaManager and
ControllerMutationQuotaManager).

A quota applies to a (user, client id) pair through the most specific stored entity (model.resolve);
the pair's usage is recorded in a sensor keyed as Kafka keys its metrics (the matched entity's types,
a default entity's name replaced by the real one: every user under `/users/<default>` has its own
sensor; every client of `/users/u` shares one). A sensor is a sampled rate over `quota.window.num`
windows of `quota.window.size.seconds` (Kafka's Rate: the window counts as at least num-1 full
windows, so a new client is measured over ~10 s). When a recorded value puts the rate over the
quota the throttle time is (rate - quota) / quota x window, as Kafka's QuotaUtils.throttleTime; the response carries it as throttle_time_ms and the connection reads
nothing more for that long (KIP-219).

controller_mutation_rate (KIP-599) is a token bucket holding quota x num x window tokens (partitions
created or deleted): a strict request (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) gets
THROTTLING_QUOTA_EXCEEDED for a topic once the bucket is empty; older versions are only throttled.

Hot path: `active` is False until a user/client quota exists, and Produce/Fetch check only that.
"""
from __future__ import annotations

import time
from typing import Callable

from minikafka.broker.quota import model as m

PRODUCE, FETCH, REQUEST, MUTATION = "produce", "fetch", "request", "controller_mutation"
KEY_OF = {PRODUCE: m.PRODUCER_BYTE_RATE, FETCH: m.CONSUMER_BYTE_RATE, REQUEST: m.REQUEST_PERCENTAGE,
          MUTATION: m.CONTROLLER_MUTATION_RATE}


class Rate:
    """Kafka's SampledStat + Rate: `num` samples of `window_s` seconds each."""
    __slots__ = ("num", "window_s", "samples")

    def __init__(self, num: int, window_s: float) -> None:
        self.num, self.window_s = num, window_s
        self.samples: list[list[float]] = []  # [start, value], oldest first

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        if not self.samples or now >= self.samples[-1][0] + self.window_s:
            self.samples.append([now, 0.0])
            if len(self.samples) > self.num:
                del self.samples[0]
        self.samples[-1][1] += value

    def _purge(self, now: float) -> None:
        horizon = now - self.num * self.window_s
        while self.samples and self.samples[0][0] + self.window_s <= horizon:
            del self.samples[0]

    def window(self, now: float) -> float:
        """Kafka's Rate.windowSize, in seconds."""
        elapsed = now - self.samples[0][0] if self.samples else 0.0
        full = int(elapsed / self.window_s)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_s
        return elapsed

    def measure(self, now: float) -> tuple[float, float]:
        self._purge(now)
        w = self.window(now)
        return sum(v for _s, v in self.samples) / w, w


class TokenBucket:
    """Kafka's TokenBucket stat: `rate` tokens a second, at most rate x num x window, may go negative."""
    __slots__ = ("rate", "burst", "tokens", "last")

    def __init__(self, rate: float, num: int, window_s: float, now: float) -> None:
        self.rate, self.burst = rate, rate * num * window_s
        self.tokens, self.last = self.burst, now

    def refill(self, now: float) -> float:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        return self.tokens


def user_of(principal: str) -> str:
    return principal.partition(":")[2] if ":" in principal else principal


SensorKey = tuple[str, str, str]  # quota type, user tag, client-id tag ("" when not part of the entity)


class ClientQuotaManager:
    def __init__(self, window_num: int = 11, window_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.num, self.window_s, self.clock = max(1, window_num), max(0.001, window_s), clock
        self.quotas: m.Quotas = {}
        self.active = False  # a user / client-id quota of any key exists
        self.keys: frozenset[str] = frozenset()
        self.rates: dict[SensorKey, Rate] = {}
        self.buckets: dict[SensorKey, TokenBucket] = {}
        self.throttle_ms_total: dict[SensorKey, float] = {}
        self.throttled_total: dict[SensorKey, int] = {}
        self.recorded_total: dict[SensorKey, float] = {}
        # connection_creation_rate (KIP-612) by ip address, None = the default ip entity
        self.ip_rates: dict[str | None, float] = {}
        self.ip_active = False
        self.ip_sensors: dict[str, Rate] = {}
        # max.connection.creation.rate (KIP-612): per listener name, None = broker-wide
        self.listener_rates: dict[str | None, float] = {}
        self.listener_sensors: dict[str | None, Rate] = {}

    # -- configuration ------------------------------------------------------------------------------
    def replace(self, quotas: m.Quotas) -> None:
        """The stored quotas changed: rates already measured stay (Kafka keeps its sensors)."""
        self.quotas = {e: dict(v) for e, v in quotas.items()}
        keys = {k for e, v in self.quotas.items() if not any(t == m.IP for t, _ in e) for k in v}
        self.keys = frozenset(keys)
        self.active = bool(keys)
        self.buckets.clear()  # a new rate: a fresh bucket
        self.ip_rates = {dict(e)[m.IP]: v[m.CONNECTION_CREATION_RATE] for e, v in self.quotas.items()
                         if any(t == m.IP for t, _ in e) and m.CONNECTION_CREATION_RATE in v}
        self.ip_active = bool(self.ip_rates)

    def quota_for(self, qtype: str, principal: str, client_id: str | None) -> tuple[SensorKey, float] | None:
        key = KEY_OF[qtype]
        if key not in self.keys:
            return None
        user, client = user_of(principal), client_id or ""
        found = m.resolve(self.quotas, key, user, client)
        if found is None:
            return None
        entity, bound = found
        types = dict(entity)
        return (qtype, user if m.USER in types else "", client if m.CLIENT_ID in types else ""), bound

    # -- byte rates and request time ------------------------------------------------------------------
    def record(self, qtype: str, principal: str, client_id: str | None, value: float) -> int:
        """Record `value` (bytes, or request time as a percentage-second) and return the throttle time
        in ms (0 when within the quota or no quota applies)."""
        found = self.quota_for(qtype, principal, client_id)
        if found is None:
            return 0
        skey, bound = found
        now = self.clock()
        rate = self.rates.get(skey)
        if rate is None:
            rate = self.rates[skey] = Rate(self.num, self.window_s)
        rate.record(value, now)
        self.recorded_total[skey] = self.recorded_total.get(skey, 0.0) + value
        measured, window = rate.measure(now)
        if measured <= bound:
            return 0
        throttle_ms = round((measured - bound) / bound * window * 1000.0)  # QuotaUtils.throttleTime: not capped
        self.note_throttle(skey, throttle_ms)
        return throttle_ms

    def max_fetch_bytes(self, principal: str, client_id: str | None) -> int | None:
        """Kafka's getMaxValueInQuotaWindow: a consumer under consumer_byte_rate fetches at most
        quota x (num - 1) x window bytes at once (more would always be throttled)."""
        found = self.quota_for(FETCH, principal, client_id)
        return None if found is None else max(1, int(found[1] * (self.num - 1) * self.window_s))

    def unrecord(self, qtype: str, principal: str, client_id: str | None, value: float) -> None:
        """Take back a recorded value (Kafka's unrecordQuotaSensor: a throttled fetch is answered empty)."""
        found = self.quota_for(qtype, principal, client_id)
        rate = self.rates.get(found[0]) if found is not None else None
        if rate is not None and rate.samples and found is not None:
            rate.samples[-1][1] -= value
            self.recorded_total[found[0]] = self.recorded_total.get(found[0], 0.0) - value

    def note_throttle(self, skey: SensorKey, throttle_ms: float) -> None:
        if throttle_ms > 0:
            self.throttle_ms_total[skey] = self.throttle_ms_total.get(skey, 0.0) + throttle_ms
            self.throttled_total[skey] = self.throttled_total.get(skey, 0) + 1

    # -- connection creation by ip (KIP-612: Kafka's ConnectionQuotas) ------------------------------------
    def record_connection(self, ip: str) -> int:
        """A new connection from `ip`: 0 to accept it, else the throttle time in ms after which the
        refused connection is closed (the attempt is not counted, as Kafka unrecords it)."""
        bound = self.ip_rates.get(ip, self.ip_rates.get(None))
        if bound is None:
            return 0
        now = self.clock()
        rate = self.ip_sensors.get(ip)
        if rate is None:
            if len(self.ip_sensors) >= 100_000:  # bounded: forget the oldest addresses
                for old in list(self.ip_sensors)[:10_000]:
                    del self.ip_sensors[old]
            rate = self.ip_sensors[ip] = Rate(self.num, self.window_s)
        rate.record(1.0, now)
        measured, window = rate.measure(now)
        if measured <= bound:
            return 0
        rate.samples[-1][1] -= 1.0
        # Kafka bounds it by one window (ConnectionQuotas' maxThrottleTimeMs)
        ms = round(min((measured - bound) / bound * window, self.window_s) * 1000.0)
        self.note_throttle(("connection_creation", "", ip), ms)
        return ms

    def set_connection_rates(self, broker_wide: int, per_listener: dict[str, int]) -> None:
        """`max.connection.creation.rate` and its listener overrides; Int.MaxValue means none. Rates
        measured so far stay (Kafka updates the bound of its existing sensors)."""
        rates: dict[str | None, float] = {k: float(v) for k, v in per_listener.items() if v < 2**31 - 1}
        if broker_wide < 2**31 - 1:
            rates[None] = float(broker_wide)
        self.listener_rates = rates

    def record_listener_connection(self, listener: str, protected: bool) -> int:
        """A new connection on `listener`: the ms its acceptance waits (Kafka's waitForConnectionSlot:
        the listener's rate and, unless `protected` (the inter-broker listener), the broker-wide one;
        recorded even when throttled, the wait bounded by one window). 0: served at once."""
        if not self.listener_rates:
            return 0
        now, wait = self.clock(), 0
        for key in (listener, None):
            bound = self.listener_rates.get(key)
            if bound is None or (key is None and protected):
                continue
            rate = self.listener_sensors.get(key)
            if rate is None:
                rate = self.listener_sensors[key] = Rate(self.num, self.window_s)
            rate.record(1.0, now)
            measured, window = rate.measure(now)
            if measured > bound:
                over = (measured - bound) / bound * window if bound > 0 else self.window_s
                ms = round(min(over, self.window_s) * 1000.0)
                self.note_throttle(("listener_connection_creation", "", key or ""), ms)
                wait = max(wait, ms)
        return wait

    # -- controller mutations (KIP-599) -----------------------------------------------------------------
    def mutation_bucket(self, principal: str, client_id: str | None) -> tuple[SensorKey, TokenBucket] | None:
        found = self.quota_for(MUTATION, principal, client_id)
        if found is None:
            return None
        skey, bound = found
        now = self.clock()
        bucket = self.buckets.get(skey)
        if bucket is None or bucket.rate != bound:
            bucket = self.buckets[skey] = TokenBucket(bound, self.num, self.window_s, now)
        bucket.refill(now)
        return skey, bucket

    def mutation_throttle_ms(self, bucket: TokenBucket) -> int:
        return 0 if bucket.tokens >= 0 else int(-bucket.tokens / bucket.rate * 1000.0)

    # -- metrics -------------------------------------------------------------------------------------------
    def byte_rates(self) -> dict[SensorKey, float]:
        now = self.clock()
        return {k: r.measure(now)[0] for k, r in self.rates.items() if k[0] in (PRODUCE, FETCH)}


class MutationQuota:
    """One CreateTopics / CreatePartitions / DeleteTopics request's view of its controller mutation
    quota: `exceeded()` before a topic (strict requests refuse it), `record(n)` after it."""

    def __init__(self, manager: ClientQuotaManager | None, principal: str, client_id: str | None, strict: bool) -> None:
        self.manager, self.strict = manager, strict
        found = manager.mutation_bucket(principal, client_id) if manager is not None and manager.active else None
        self.skey, self.bucket = found if found is not None else (None, None)

    def exceeded(self) -> bool:
        return self.strict and self.bucket is not None and self.bucket.tokens < 0

    def record(self, partitions: int) -> None:
        if self.bucket is not None and partitions > 0:
            self.bucket.tokens -= partitions
            if self.manager is not None and self.skey is not None:
                self.manager.recorded_total[self.skey] = self.manager.recorded_total.get(self.skey, 0.0) + partitions

    def throttle_ms(self) -> int:
        if self.bucket is None or self.manager is None or self.skey is None:
            return 0
        ms = self.manager.mutation_throttle_ms(self.bucket)
        self.manager.note_throttle(self.skey, ms)
        return ms
