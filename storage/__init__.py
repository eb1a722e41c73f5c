"""Partition storage in Kafka's on-disk layout (segments, indexes, recovery, retention).

Never imports broker or coordinator; knows nothing about sockets or asyncio.
"""
from minikafka.storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnsupportedMagicError,
)
from minikafka.storage.log_config import TOPIC_CONFIG_KEYS, LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.storage.partition_log import AppendInfo, PartitionLog

__all__ = [
    "AppendInfo", "LogConfig", "LogManager", "PartitionLog", "TOPIC_CONFIG_KEYS",
    "CorruptRecordError", "InvalidConfigError", "InvalidRecordError", "KafkaStorageError",
    "OffsetOutOfRangeError", "RecordBatchTooLargeError", "RecordTooLargeError", "UnsupportedMagicError",
]
