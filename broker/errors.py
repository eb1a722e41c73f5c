"""The one place that maps domain exceptions to Kafka error codes."""
from __future__ import annotations

import logging

import kafka.errors as ke

from minikafka.protocol import record_batch, record_validator
from minikafka.storage import errors as se
from minikafka.broker import topic_catalog as tc
from minikafka.protocol.errors import INVALID_REPLICA_ASSIGNMENT, UNKNOWN_SERVER_ERROR, UNSUPPORTED_COMPRESSION_TYPE

log = logging.getLogger(__name__)


_MAPPING: list[tuple[type[BaseException], int]] = [
    (se.OffsetOutOfRangeError, ke.OffsetOutOfRangeError.errno),
    (se.RecordBatchTooLargeError, ke.RecordListTooLargeError.errno),  # before its base class
    (se.RecordTooLargeError, ke.MessageSizeTooLargeError.errno),
    (record_batch.CorruptRecordError, ke.CorruptRecordError.errno),
    (record_validator.InvalidTimestampError, ke.InvalidTimestampError.errno),  # before InvalidRecordError
    (record_validator.UndecodableBatchError, UNKNOWN_SERVER_ERROR),  # as Kafka answers; not logged as a bug
    (record_batch.InvalidRecordError, ke.InvalidRecordError.errno),  # includes UnsupportedMagicError
    (record_batch.UnsupportedCompressionError, UNSUPPORTED_COMPRESSION_TYPE),
    (se.InvalidConfigError, ke.InvalidConfigurationError.errno),
    (se.KafkaStorageError, ke.KafkaStorageError.errno),
    (se.OutOfOrderSequenceError, ke.OutOfOrderSequenceNumberError.errno),
    (se.InvalidProducerEpochError, ke.InvalidProducerEpochError.errno),
    (se.InvalidTxnStateError, ke.InvalidTxnStateError.errno),
    (se.TransactionCoordinatorFencedError, ke.TransactionCoordinatorFencedError.errno),
    (tc.UnknownTopicError, ke.UnknownTopicOrPartitionError.errno),
    (tc.TopicExistsError, ke.TopicAlreadyExistsError.errno),
    (tc.InvalidTopicNameError, ke.InvalidTopicError.errno),
    (tc.InvalidPartitionCountError, ke.InvalidPartitionsError.errno),
    (tc.InvalidReplicationFactorError, ke.InvalidReplicationFactorError.errno),
    (tc.InvalidReplicaAssignmentError, INVALID_REPLICA_ASSIGNMENT),
]


def error_code(exc: BaseException) -> int:
    """Kafka error code for a domain exception; unexpected exceptions are logged and UNKNOWN_SERVER_ERROR."""
    for exc_type, code in _MAPPING:
        if isinstance(exc, exc_type):
            return code
    log.exception("unexpected error", exc_info=exc)
    return UNKNOWN_SERVER_ERROR


def error_message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
