"""Broker settings of the share coordinator (Kafka's ShareCoordinatorConfig: key names, defaults, ranges)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

SHARE_STATE_TOPIC = "__share_group_state"

# key -> (Kafka's default, lowest allowed, highest allowed or None)
KEYS: dict[str, tuple[str, int, int | None]] = {
    "share.coordinator.state.topic.num.partitions": ("50", 1, None),
    "share.coordinator.state.topic.replication.factor": ("3", 1, 32767),
    "share.coordinator.state.topic.min.isr": ("2", 1, 32767),
    "share.coordinator.state.topic.segment.bytes": ("104857600", 1, None),
    "share.coordinator.snapshot.update.records.per.snapshot": ("500", 0, 500),
    "share.coordinator.write.timeout.ms": ("5000", 1, None),
    "share.coordinator.state.topic.prune.interval.ms": ("300000", 1, None),
    "share.coordinator.cold.partition.snapshot.interval.ms": ("300000", 1, None),
}


def _int(get: Callable[[str], str], key: str) -> int:
    default, low, high = KEYS[key]
    raw = (get(key) or default).strip()
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"Invalid value {raw} for configuration {key}: Not a number of type INT") from None
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None or high == 32767 else f"in [{low},...,{high}]"
        raise ValueError(f"Invalid value {value} for configuration {key}: Value must be {bound}")
    return value


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    records_per_snapshot: int = 500
    write_timeout_ms: int = 5000
    prune_interval_ms: int = 300000
    cold_partition_snapshot_interval_ms: int = 300000

    @classmethod
    def from_props(cls, get: Callable[[str], str]) -> "ShareCoordinatorConfig":
        """Read and validate (ValueError with Kafka's message for a value out of range)."""
        p = "share.coordinator."
        return cls(
            num_partitions=_int(get, p + "state.topic.num.partitions"),
            replication_factor=_int(get, p + "state.topic.replication.factor"),
            min_isr=_int(get, p + "state.topic.min.isr"),
            segment_bytes=_int(get, p + "state.topic.segment.bytes"),
            records_per_snapshot=_int(get, p + "snapshot.update.records.per.snapshot"),
            write_timeout_ms=_int(get, p + "write.timeout.ms"),
            prune_interval_ms=_int(get, p + "state.topic.prune.interval.ms"),
            cold_partition_snapshot_interval_ms=_int(get, p + "cold.partition.snapshot.interval.ms"),
        )

    def topic_configs(self) -> dict[str, str]:
        """Configs of `__share_group_state` at creation (Kafka's shareGroupStateTopicConfigs: a delete-policy
        topic kept forever, its redundant prefix removed by the coordinator's pruning)."""
        return {"cleanup.policy": "delete", "compression.type": "producer", "segment.bytes": str(self.segment_bytes),
                "min.insync.replicas": str(self.min_isr), "retention.ms": "-1"}
