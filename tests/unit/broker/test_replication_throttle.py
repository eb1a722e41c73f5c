"""Replication throttles (broker/replication/throttle.py), pure: which partitions a topic's throttled
replica list names, and Kafka's Rate over sample windows with a fake clock."""
from __future__ import annotations

from minikafka.broker.replication.throttle import ReplicationQuota, rate_of, throttled


def test_throttled_replica_lists():
    assert throttled("*", 3, 1)
    assert throttled("0:1, 3:1", 3, 1) and not throttled("0:1,3:2", 3, 1)
    assert not throttled("", 0, 1) and not throttled("10:1", 1, 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_counts_at_least_all_but_one_window_then_slides():
    """11 windows of 1 s: the first burst may reach 10 s worth of the limit; afterwards the rate over
    the sliding windows decides; unset is unlimited."""
    clock = Clock()
    limit: list[int | None] = [1000]
    q = ReplicationQuota(lambda: limit[0], clock=clock)
    assert not q.exceeded()
    q.record(9_000)
    assert not q.exceeded()  # 9000 B / 10 s < 1000 B/s
    q.record(2_000)
    assert q.exceeded()  # 11000 B / 10 s
    clock.now += 12.0  # every sample slid out of the 11 windows
    assert not q.exceeded()
    for _ in range(20):  # a steady 1500 B/s is over the limit once the windows are full
        q.record(1_500)
        clock.now += 1.0
    assert q.exceeded()
    limit[0] = None
    assert not q.exceeded()


def test_short_windows_and_rate_from_config():
    clock = Clock()
    q = ReplicationQuota(lambda: 1000, windows=2, window_s=1.0, clock=clock)
    q.record(1_500)
    assert q.exceeded()  # the span is at least one window
    clock.now += 2.5
    assert not q.exceeded()
    props = {"r": " 2048 ", "bad": "x"}
    assert rate_of(lambda k: props.get(k, ""), "r")() == 2048
    assert rate_of(lambda k: props.get(k, ""), "bad")() is None and rate_of(lambda k: props.get(k, ""), "none")() is None
