"""Consumer group (KIP-848) settings. `settings_for(group_id)` is the one lookup: the broker's values,
overridden per group by the GROUP config resources (`consumer.session.timeout.ms`,
`consumer.heartbeat.interval.ms`, `consumer.assignment.interval.ms`) when a group config source is set."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Protocol

from minikafka.coordinator.group.consumer.assignors import resolve_names

INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class ConsumerGroupSettings:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    max_size: int = INT_MAX
    migration_policy: str = "bidirectional"
    regex_refresh_interval_ms: int = 10000
    assignment_interval_ms: int = 1000  # KIP-1263 batching of target assignments

    @classmethod
    def from_props(cls, get: Callable[[str], str]) -> "ConsumerGroupSettings":
        """The broker's values; raises ValueError for a combination Kafka refuses at start-up."""
        def num(key: str, default: int) -> int:
            value = get(key)
            return int(value) if value else default
        for name, default, lo, hi in (("heartbeat.interval.ms", 5000, 5000, 15000),
                                      ("session.timeout.ms", 45000, 45000, 60000)):
            value = num(f"group.consumer.{name}", default)
            low = num(f"group.consumer.min.{name}", lo)
            high = num(f"group.consumer.max.{name}", hi)
            if not low <= value <= high:
                raise ValueError(f"group.consumer.{name} must be within [group.consumer.min.{name}, "
                                 f"group.consumer.max.{name}] = [{low}, {high}], got {value}")
        if num("group.consumer.heartbeat.interval.ms", 5000) >= num("group.consumer.session.timeout.ms", 45000):
            raise ValueError("group.consumer.heartbeat.interval.ms must be less than "
                             "group.consumer.session.timeout.ms")
        return cls(
            heartbeat_interval_ms=num("group.consumer.heartbeat.interval.ms", 5000),
            session_timeout_ms=num("group.consumer.session.timeout.ms", 45000),
            assignors=tuple(resolve_names(get("group.consumer.assignors") or "uniform,range")),
            max_size=num("group.consumer.max.size", INT_MAX),
            migration_policy=(get("group.consumer.migration.policy") or "bidirectional").lower(),
            regex_refresh_interval_ms=num("group.consumer.regex.refresh.interval.ms", 10000),
            assignment_interval_ms=num("group.consumer.assignment.interval.ms", 1000),
        )


class GroupConfigSource(Protocol):
    """The broker's group config store (broker/config/group_configs.py), seen from the coordinator."""
    overrides: dict[str, dict[str, str]]

    def group_config(self, group_id: str, name: str) -> int | bool | str: ...


# group config name -> ConsumerGroupSettings field
_PER_GROUP = (("consumer.session.timeout.ms", "session_timeout_ms"),
              ("consumer.heartbeat.interval.ms", "heartbeat_interval_ms"),
              ("consumer.assignment.interval.ms", "assignment_interval_ms"))


class ConsumerGroupConfigs:
    """Where the coordinator reads its per-group settings from. Invariant: a group without
    overrides gets `defaults` itself (no copy per heartbeat); one with overrides gets them on top."""

    def __init__(self, broker_defaults: ConsumerGroupSettings, source: GroupConfigSource | None = None) -> None:
        self.defaults = broker_defaults
        self.source = source

    def settings_for(self, group_id: str) -> ConsumerGroupSettings:
        source = self.source
        if source is None or not source.overrides.get(group_id):
            return self.defaults
        return replace(self.defaults, **{field: int(source.group_config(group_id, name)) for name, field in _PER_GROUP})
