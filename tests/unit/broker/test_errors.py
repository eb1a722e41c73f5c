"""The one error-mapping function: every domain exception maps to Kafka's code for it."""
from __future__ import annotations

import logging

import pytest

from minikafka.broker import errors
from minikafka.broker import topic_catalog as tc
from minikafka.protocol import record_batch as rb
from minikafka.storage import errors as se


@pytest.mark.parametrize("exc,code", [
    (se.OffsetOutOfRangeError("x"), 1),
    (rb.CorruptRecordError("crc"), 2),
    (tc.UnknownTopicError("t"), 3),
    (se.RecordTooLargeError("big"), 10),
    (tc.InvalidTopicNameError("bad"), 17),
    (se.RecordBatchTooLargeError("huge"), 18),  # subclass of RecordTooLargeError: must win
    (tc.TopicExistsError("t"), 36),
    (tc.InvalidPartitionCountError("p"), 37),
    (tc.InvalidReplicationFactorError("rf"), 38),
    (tc.InvalidReplicaAssignmentError("a"), 39),
    (se.InvalidConfigError("retention.ms", "nope"), 40),
    (se.KafkaStorageError("io"), 56),
    (rb.UnsupportedCompressionError("zstd"), 76),
    (rb.InvalidRecordError("bad"), 87),
    (rb.UnsupportedMagicError("magic 1"), 87),
])
def test_domain_errors_map_to_kafka_codes(exc, code):
    assert errors.error_code(exc) == code


def test_unexpected_exception_is_unknown_server_error_and_logged(caplog):
    with caplog.at_level(logging.ERROR, logger="minikafka.broker.errors"):
        assert errors.error_code(RuntimeError("boom")) == errors.UNKNOWN_SERVER_ERROR == -1
    assert "boom" in caplog.text
