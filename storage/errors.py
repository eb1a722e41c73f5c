"""Typed storage errors. Handlers map these to Kafka error codes in one place (not here)."""
from __future__ import annotations

from minikafka.protocol.record_batch import (  # re-exported
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedMagicError,
)

__all__ = [
    "CorruptRecordError",
    "InvalidRecordError",
    "UnsupportedMagicError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "RecordBatchTooLargeError",
    "InvalidConfigError",
    "KafkaStorageError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
    "CorruptSnapshotError",
    "UnexpectedAppendOffsetError",
]


class OffsetOutOfRangeError(Exception):
    """Requested offset is below the log start offset or above the log end offset (OFFSET_OUT_OF_RANGE)."""


class RecordTooLargeError(Exception):
    """A batch is larger than max.message.bytes (MESSAGE_TOO_LARGE)."""


class RecordBatchTooLargeError(RecordTooLargeError):
    """A whole produce payload is larger than segment.bytes (RECORD_LIST_TOO_LARGE)."""


class InvalidConfigError(Exception):
    """A topic config key is unknown or its value is invalid (INVALID_CONFIG)."""

    def __init__(self, key: str, msg: str) -> None:
        super().__init__(f"{key}: {msg}")
        self.key = key
        self.msg = msg


class KafkaStorageError(Exception):
    """An I/O failure or an inconsistent on-disk state (KAFKA_STORAGE_ERROR)."""


class OutOfOrderSequenceError(Exception):
    """An idempotent batch's sequence does not follow the producer's last one (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerEpochError(Exception):
    """A batch carries an epoch older than the producer's current one (INVALID_PRODUCER_EPOCH)."""


class InvalidTxnStateError(Exception):
    """A non-transactional batch from a producer with an ongoing transaction (INVALID_TXN_STATE)."""


class TransactionCoordinatorFencedError(Exception):
    """A transaction marker carries an older coordinator epoch than the producer's last marker
    (TRANSACTION_COORDINATOR_FENCED)."""


class CorruptSnapshotError(Exception):
    """A producer-state snapshot file fails its version, CRC or length check (skipped on load)."""


class UnexpectedAppendOffsetError(Exception):
    """A follower's append does not continue the log: its first offset is below the log end offset, or
    its offsets do not increase (Kafka's UnexpectedAppendOffsetException / OffsetsOutOfOrderException).
    The replica manager truncates (or refetches) and tries again."""

    def __init__(self, msg: str, first_offset: int, last_offset: int) -> None:
        super().__init__(msg)
        self.first_offset = first_offset
        self.last_offset = last_offset
