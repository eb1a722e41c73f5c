"""Streams group settings (KIP-1071). `settings_for(group_id)` is the one lookup: the broker's
`group.streams.*` values, overridden per group by the GROUP config resources (`streams.session.timeout.ms`,
`streams.heartbeat.interval.ms`, `streams.num.standby.replicas`, `streams.initial.rebalance.delay.ms`,
`streams.assignment.interval.ms`) when a group config source is set. Defaults and bounds are Kafka 4.3.1's
GroupCoordinatorConfig."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from minikafka.coordinator.group.consumer.config import GroupConfigSource

INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class StreamsGroupSettings:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = INT_MAX
    num_standby_replicas: int = 0
    initial_rebalance_delay_ms: int = 3000
    assignment_interval_ms: int = 1000

    @classmethod
    def from_props(cls, get: Callable[[str], str]) -> "StreamsGroupSettings":
        """The broker's values; raises ValueError for a combination Kafka refuses at start-up."""
        def num(key: str, default: int) -> int:
            value = get(key)
            return int(value) if value else default
        for name, default, lo, hi in (("heartbeat.interval.ms", 5000, 5000, 15000),
                                      ("session.timeout.ms", 45000, 45000, 60000),
                                      ("assignment.interval.ms", 1000, 0, 15000)):
            value = num(f"group.streams.{name}", default)
            low = num(f"group.streams.min.{name}", lo)
            high = num(f"group.streams.max.{name}", hi)
            if not low <= value <= high:
                raise ValueError(f"group.streams.{name} must be within [group.streams.min.{name}, "
                                 f"group.streams.max.{name}] = [{low}, {high}], got {value}")
        if num("group.streams.heartbeat.interval.ms", 5000) >= num("group.streams.session.timeout.ms", 45000):
            raise ValueError("group.streams.heartbeat.interval.ms must be less than group.streams.session.timeout.ms")
        standby = num("group.streams.num.standby.replicas", 0)
        if not 0 <= standby <= num("group.streams.max.standby.replicas", 2):
            raise ValueError("group.streams.num.standby.replicas must be within [0, group.streams.max.standby.replicas]")
        return cls(
            session_timeout_ms=num("group.streams.session.timeout.ms", 45000),
            heartbeat_interval_ms=num("group.streams.heartbeat.interval.ms", 5000),
            max_size=num("group.streams.max.size", INT_MAX),
            num_standby_replicas=standby,
            initial_rebalance_delay_ms=num("group.streams.initial.rebalance.delay.ms", 3000),
            assignment_interval_ms=num("group.streams.assignment.interval.ms", 1000),
        )


# group config name -> StreamsGroupSettings field
_PER_GROUP = (("streams.session.timeout.ms", "session_timeout_ms"),
              ("streams.heartbeat.interval.ms", "heartbeat_interval_ms"),
              ("streams.num.standby.replicas", "num_standby_replicas"),
              ("streams.initial.rebalance.delay.ms", "initial_rebalance_delay_ms"),
              ("streams.assignment.interval.ms", "assignment_interval_ms"))


class StreamsGroupConfigs:
    """Where the coordinator reads its per-group settings from: a group without overrides gets the
    broker's `defaults` itself; one with overrides gets them on top."""

    def __init__(self, broker_defaults: StreamsGroupSettings, source: GroupConfigSource | None = None) -> None:
        self.defaults = broker_defaults
        self.source = source

    def settings_for(self, group_id: str) -> StreamsGroupSettings:
        source = self.source
        if source is None or not source.overrides.get(group_id):
            return self.defaults
        return replace(self.defaults, **{f: int(source.group_config(group_id, name)) for name, f in _PER_GROUP})
