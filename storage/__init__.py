"""Partition storage in Kafka's on-disk layout (segments, indexes, recovery, retention).

Never imports broker or coordinator; knows nothing about sockets or asyncio. The names below load
their module on first access, so that importing one storage module does not import them all (the
broker lists partitions at start-up without loading the log code).
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AppendInfo": "partition_log",
    "PartitionLog": "partition_log",
    "LogManager": "log_manager",
    "LogConfig": "log_config",
    "TOPIC_CONFIG_KEYS": "log_config",
    "CorruptRecordError": "errors",
    "InvalidConfigError": "errors",
    "InvalidRecordError": "errors",
    "KafkaStorageError": "errors",
    "OffsetOutOfRangeError": "errors",
    "RecordBatchTooLargeError": "errors",
    "RecordTooLargeError": "errors",
    "UnsupportedMagicError": "errors",
    "UnexpectedAppendOffsetError": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
