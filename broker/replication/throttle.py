"""Replication throttles (Kafka's ReplicationQuotaManager; `kafka-reassign-partitions --throttle`).

A partition is throttled on this broker when its topic's `leader.replication.throttled.replicas`
(leader side) or `follower.replication.throttled.replicas` (follower side) is '*' or lists
`<partition>:<this broker>`. Only replicas outside the ISR are throttled (a move's new replicas, a
follower catching up), never the ISR. The rate is the broker's `leader.replication.throttled.rate` /
`follower.replication.throttled.rate` (bytes/s, unset: unlimited), measured as Kafka's Rate over
`replication.quota.window.num` (11) windows of `replication.quota.window.size.seconds` (1): the bytes
in the windows divided by their span, the span counted as at least all but one window. While the rate
is above the limit, a throttled partition gets no records (leader) or is not fetched (follower).
"""
from __future__ import annotations

import time
from collections import deque
from typing import Callable

WINDOWS = 11
WINDOW_S = 1.0


def throttled(replica_list: str, partition: int, broker: int) -> bool:
    """Whether a topic's throttled-replicas value names this partition on `broker`."""
    if not replica_list:
        return False
    items = [item.strip() for item in replica_list.split(",")]
    return items == ["*"] or f"{partition}:{broker}" in items


class ReplicationQuota:
    """One direction's byte rate (leader or follower) of this broker; `clock` in seconds."""

    def __init__(self, rate: Callable[[], int | None], windows: int = WINDOWS, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self.windows, self.window_s = max(windows, 1), max(window_s, 0.001)
        self._clock = clock
        self._samples: deque[list[float]] = deque()  # [window start, bytes], oldest first

    def _purge(self, now: float) -> None:
        while self._samples and self._samples[0][0] <= now - self.windows * self.window_s:
            self._samples.popleft()

    def record(self, size: int) -> None:
        now = self._clock()
        self._purge(now)
        if not self._samples or now >= self._samples[-1][0] + self.window_s:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += size

    def exceeded(self) -> bool:
        limit = self._rate()
        if limit is None:
            return False
        now = self._clock()
        self._purge(now)
        if not self._samples:
            return False
        span = max(now - self._samples[0][0], (self.windows - 1) * self.window_s, self.window_s)
        return sum(b for _s, b in self._samples) / span > limit


def rate_of(get: Callable[[str], str], key: str) -> Callable[[], int | None]:
    """The broker config `key` as a rate (None when unset or unparsable: unlimited)."""
    def rate() -> int | None:
        raw = get(key).strip()
        try:
            return int(raw) if raw else None
        except ValueError:
            return None
    return rate
