"""Writing COMMIT/ABORT markers into partitions (Kafka's WriteTxnMarkers path, and the marker channel
of its transaction coordinator).

On one broker the coordinator appends markers in-process through the same function the
WriteTxnMarkers handler uses. A marker written into a coordinator state topic partition (the
group's `__consumer_offsets` partition for transactional offset commits) is then announced to that
topic's listener, which materialises or drops the pending offsets of the producer.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import kafka.errors as ke

from minikafka.storage.producer_state import AppendOrigin
from minikafka.storage.txn_markers import build_marker_batch

log = logging.getLogger(__name__)

MARKER_LEADER_EPOCH = 0
# fn(partition, producer_id, commit): a marker for `producer_id` was written to partition `partition`
MarkerListener = Callable[[int, int, bool], None]


class MarkerWriter:
    def __init__(self, catalog: Any, error_code: Callable[[BaseException], int],
                 clock: Callable[[], float] = time.time) -> None:
        self.catalog = catalog
        self.error_code = error_code
        self.clock = clock
        self.listeners: dict[str, MarkerListener] = {}

    def add_listener(self, topic: str, listener: MarkerListener) -> None:
        """Be told about every marker written to `topic` (the group coordinator for __consumer_offsets)."""
        self.listeners[topic] = listener

    def write(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
              coordinator_epoch: int, transaction_version: int = 0) -> int:
        """Append one marker; returns a Kafka error code (0, UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR, ...).
        `transaction_version` is that of the transaction (WriteTxnMarkers v2): a TV2 marker must carry
        an epoch newer than the producer's data in the partition."""
        plog = self.catalog.partition_log(topic, partition)
        if plog is None:
            return ke.UnknownTopicOrPartitionError.errno
        batch = build_marker_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                                   int(self.clock() * 1000))
        try:
            plog.append(batch, leader_epoch=MARKER_LEADER_EPOCH, origin=AppendOrigin.COORDINATOR,
                        transaction_version=transaction_version)
        except Exception as exc:
            code = self.error_code(exc)
            log.info("%s marker for producer %d epoch %d to %s-%d failed: %s (%d)",
                     "COMMIT" if commit else "ABORT", producer_id, producer_epoch, topic, partition, exc, code)
            return code
        listener = self.listeners.get(topic)
        if listener is not None:
            try:
                listener(partition, producer_id, commit)
            except Exception:
                log.exception("marker listener of %s failed for producer %d", topic, producer_id)
        return 0
