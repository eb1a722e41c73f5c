"""Share-group broker settings (Kafka 4.3.1's ShareGroupConfig and GroupCoordinatorConfig `group.share.*`): each
value must lie within its min/max keys, which also bound the GROUP configs (broker/config/group_configs.py)."""
from __future__ import annotations

from typing import Callable

# name -> (default, min default, max default); the value is bounded by group.share.min.<name> / max.<name>
BOUNDED = {
    "session.timeout.ms": (45000, 45000, 60000),
    "heartbeat.interval.ms": (5000, 5000, 15000),
    "record.lock.duration.ms": (30000, 15000, 60000),
    "delivery.count.limit": (5, 2, 10),
    "partition.max.record.locks": (2000, 100, 4000),
    "assignment.interval.ms": (1000, 0, 15000),
}
DEFAULTS = {
    **{f"group.share.{name}": str(d) for name, (d, _lo, _hi) in BOUNDED.items()},
    **{f"group.share.min.{name}": str(lo) for name, (_d, lo, _hi) in BOUNDED.items()},
    **{f"group.share.max.{name}": str(hi) for name, (_d, _lo, hi) in BOUNDED.items()},
    "group.share.max.size": "200",
    "group.share.max.share.sessions": "2000",
}


def check(get: Callable[[str], str]) -> None:
    """Raise ValueError for a combination Kafka refuses at start-up."""
    def num(key: str) -> int:
        return int(get(key) or DEFAULTS[key])
    for name in BOUNDED:
        value, low, high = num(f"group.share.{name}"), num(f"group.share.min.{name}"), num(f"group.share.max.{name}")
        if not low <= value <= high:
            raise ValueError(f"group.share.{name} must be within [group.share.min.{name}, group.share.max.{name}] "
                             f"= [{low}, {high}], got {value}")
    if num("group.share.heartbeat.interval.ms") >= num("group.share.session.timeout.ms"):
        raise ValueError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
    for key in ("group.share.max.size", "group.share.max.share.sessions"):
        if num(key) < 1:
            raise ValueError(f"{key} must be at least 1, got {num(key)}")
