"""Topic-level log configuration with Kafka's key names, defaults and validation.

`LogConfig` is immutable in spirit (replace it with `dataclasses.replace` / `from_props`, then hand
the new object to `PartitionLog.update_config`). Field names are Kafka's dotted keys with `_`.
"""
from __future__ import annotations

import re

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from minikafka.storage.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)


@dataclass(frozen=True)
class LogConfig:
    # Used by storage.
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000  # -1 = infinite
    retention_bytes: int = -1  # -1 = infinite
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX  # never
    flush_ms: int = LONG_MAX  # never
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    segment_jitter_ms: int = 0
    file_delete_delay_ms: int = 60000
    # Broker-level producer.id.expiration.ms (not a topic config: absent from the keys below).
    producer_id_expiration_ms: int = 86400000
    # Broker-level minikafka.max.uncompressed.batch.bytes (not a topic config): the most a client batch
    # may inflate to during validation. A deliberate bound Kafka does not have (issue 11).
    max_uncompressed_batch_bytes: int = 64 * 1024 * 1024
    # the codec client batches are stored in (protocol/recompression.py), its levels (Kafka's defaults)
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    min_insync_replicas: int = 1
    segment_index_bytes: int = 10485760  # a segment rolls once its offset or time index is full
    preallocate: bool = False  # only false: minikafka does not preallocate segment files
    unclean_leader_election_enable: bool = False
    message_timestamp_before_max_ms: int = LONG_MAX
    # Kafka 4.x: log.message.timestamp.after.max.ms defaults to 1 hour (before: Long.MAX_VALUE)
    message_timestamp_after_max_ms: int = 3600000
    # Replication throttles (kafka-reassign-partitions --throttle) of a cluster's replicas
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_props(cls, props: Mapping[str, str | None], base: "LogConfig | None" = None) -> "LogConfig":
        """`base` overridden by Kafka dotted keys; raises InvalidConfigError on unknown keys or bad values."""
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            spec = _SPECS.get(key)
            if spec is None:
                raise InvalidConfigError(key, "unknown topic config")
            if raw is None:
                raise InvalidConfigError(key, "null value not supported for topic configs")
            changes[spec.field] = spec.parse(key, str(raw).strip())
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def to_props(self) -> dict[str, str]:
        """Every supported key with its current value, formatted as Kafka shows it."""
        return {key: spec.render(getattr(self, spec.field)) for key, spec in _SPECS.items()}


@dataclass(frozen=True)
class _Spec:
    field: str
    parse: Callable[[str, str], Any]
    render: Callable[[Any], str]


def _integer(lo: int, hi: int) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise InvalidConfigError(key, f"value {raw!r} is not an integer") from None
        if not lo <= value <= hi:
            raise InvalidConfigError(key, f"value {value} must be in [{lo}, {hi}]")
        return value
    return parse


def _ratio(key: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise InvalidConfigError(key, f"value {raw!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise InvalidConfigError(key, f"value {value} must be in [0, 1]")
    return value


def _boolean(key: str, raw: str) -> bool:
    low = raw.lower()
    if low not in ("true", "false"):
        raise InvalidConfigError(key, f"value {raw!r} is not a boolean")
    return low == "true"


def _choice(*allowed: str) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        if raw not in allowed:
            raise InvalidConfigError(key, f"value {raw!r} must be one of {', '.join(allowed)}")
        return raw
    return parse


def _level(lo: int, hi: int, also: int | None = None) -> Callable[[str, str], int]:
    """Kafka's compression level validators: [lo, hi], plus `also` (gzip's -1, zlib's default)."""
    in_range = _integer(lo, hi)

    def parse(key: str, raw: str) -> int:
        if also is not None and raw.strip() == str(also):
            return also
        return in_range(key, raw)
    return parse


def _only_false(key: str, raw: str) -> bool:
    if _boolean(key, raw):
        raise InvalidConfigError(key, "true is not supported: minikafka does not preallocate segment files")
    return False


def _throttled_replicas(key: str, raw: str) -> str:
    """Kafka's ThrottledReplicaListValidator: '*', or partitionId:brokerId entries separated by commas."""
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if items != ["*"] and not all(re.fullmatch(r"[0-9]+:[0-9]+", item) for item in items):
        raise InvalidConfigError(key, f"Invalid value [{', '.join(items)}] for configuration {key}: {key} must be "
                                      f"the literal '*' or a list of replicas in the following format: "
                                      f"[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return raw


def _cleanup_policy(key: str, raw: str) -> str:
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if not items or any(item not in ("delete", "compact") for item in items):
        raise InvalidConfigError(key, f"value {raw!r} must be a list of delete, compact")
    return ",".join(dict.fromkeys(items))  # order as given (Kafka shows the list as set), no repeats


def _num(value: Any) -> str:
    return str(value)


def _bool(value: Any) -> str:
    return "true" if value else "false"


_LONG_ANY = _integer(LONG_MIN, LONG_MAX)
_SPECS: dict[str, _Spec] = {
    "segment.bytes": _Spec("segment_bytes", _integer(14, INT_MAX), _num),
    "segment.ms": _Spec("segment_ms", _integer(1, LONG_MAX), _num),
    "retention.ms": _Spec("retention_ms", _integer(-1, LONG_MAX), _num),
    "retention.bytes": _Spec("retention_bytes", _LONG_ANY, _num),
    "max.message.bytes": _Spec("max_message_bytes", _integer(0, INT_MAX), _num),
    "index.interval.bytes": _Spec("index_interval_bytes", _integer(0, INT_MAX), _num),
    "flush.messages": _Spec("flush_messages", _integer(1, LONG_MAX), _num),
    "flush.ms": _Spec("flush_ms", _integer(0, LONG_MAX), _num),
    "cleanup.policy": _Spec("cleanup_policy", _cleanup_policy, _num),
    "message.timestamp.type": _Spec("message_timestamp_type", _choice("CreateTime", "LogAppendTime"), _num),
    "segment.jitter.ms": _Spec("segment_jitter_ms", _integer(0, LONG_MAX), _num),
    "file.delete.delay.ms": _Spec("file_delete_delay_ms", _integer(0, LONG_MAX), _num),
    "compression.type": _Spec(
        "compression_type", _choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), _num),
    "compression.gzip.level": _Spec("compression_gzip_level", _level(1, 9, also=-1), _num),
    "compression.lz4.level": _Spec("compression_lz4_level", _level(1, 17), _num),
    "compression.zstd.level": _Spec("compression_zstd_level", _level(-131072, 22), _num),
    "delete.retention.ms": _Spec("delete_retention_ms", _integer(0, LONG_MAX), _num),
    "min.compaction.lag.ms": _Spec("min_compaction_lag_ms", _integer(0, LONG_MAX), _num),
    "max.compaction.lag.ms": _Spec("max_compaction_lag_ms", _integer(1, LONG_MAX), _num),
    "min.cleanable.dirty.ratio": _Spec("min_cleanable_dirty_ratio", _ratio, _num),
    "min.insync.replicas": _Spec("min_insync_replicas", _integer(1, INT_MAX), _num),
    "segment.index.bytes": _Spec("segment_index_bytes", _integer(4, INT_MAX), _num),
    "preallocate": _Spec("preallocate", _only_false, _bool),
    "unclean.leader.election.enable": _Spec("unclean_leader_election_enable", _boolean, _bool),
    "message.timestamp.before.max.ms": _Spec("message_timestamp_before_max_ms", _integer(0, LONG_MAX), _num),
    "message.timestamp.after.max.ms": _Spec("message_timestamp_after_max_ms", _integer(0, LONG_MAX), _num),
    "leader.replication.throttled.replicas": _Spec("leader_replication_throttled_replicas", _throttled_replicas, _num),
    "follower.replication.throttled.replicas": _Spec("follower_replication_throttled_replicas", _throttled_replicas,
                                                     _num),
}

TOPIC_CONFIG_KEYS: frozenset[str] = frozenset(_SPECS)
