"""Writing COMMIT/ABORT markers into partitions (Kafka's WriteTxnMarkers path, and the marker channel
of its transaction coordinator).

On one broker the coordinator appends markers in-process through the same function the
WriteTxnMarkers handler uses. On a cluster (`route` set) `send_many` sends each marker to the
partition's leader: appended here when this node leads the partition (stamped with its leader epoch
and waited for until replicated), else grouped per leader into one WriteTxnMarkers request each
(`remote`, over the inter-broker listener). A partition without a leader answers
NOT_LEADER_OR_FOLLOWER, which the coordinator retries. A marker written into a coordinator state topic partition (the
group's `__consumer_offsets` partition for transactional offset commits) is then announced to that
topic's listener, which materialises or drops the pending offsets of the producer.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, NamedTuple

import kafka.errors as ke

from minikafka.storage.producer_state import AppendOrigin
from minikafka.storage.txn_markers import build_marker_batch

log = logging.getLogger(__name__)

MARKER_LEADER_EPOCH = 0
# fn(partition, producer_id, commit): a marker for `producer_id` was written to partition `partition`
MarkerListener = Callable[[int, int, bool], None]
NOT_LEADER = ke.NotLeaderForPartitionError.errno


class Marker(NamedTuple):
    """One transaction's markers for some partitions (one entry of a WriteTxnMarkers request)."""
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int
    partitions: tuple[tuple[str, int], ...]


# route(topic, partition) -> None when this node leads it, else the leader's node id (-1: no leader)
Route = Callable[[str, int], "int | None"]
# remote(node_id, markers) -> {(topic, partition): error code}; raises (or answers errors) on failure
Remote = Callable[[int, list[Marker]], Awaitable[dict[tuple[str, int], int]]]
# replicated(topic, partition, end_offset) -> error code, once the append is replicated
Replicated = Callable[[str, int, int], Awaitable[int]]


class MarkerWriter:
    def __init__(self, catalog: Any, error_code: Callable[[BaseException], int],
                 clock: Callable[[], float] = time.time) -> None:
        self.catalog = catalog
        self.error_code = error_code
        self.clock = clock
        self.listeners: dict[str, MarkerListener] = {}
        self.route: Route | None = None  # None: single node, every partition is local
        self.remote: Remote | None = None
        self.replicated: Replicated | None = None
        self.leader_epoch: Callable[[str, int], int] | None = None  # the local leader's epoch

    def enable_routing(self, route: Route, remote: Remote, replicated: Replicated,
                       leader_epoch: Callable[[str, int], int]) -> None:
        """Cluster mode: markers go to the partition leaders (see module docstring)."""
        self.route, self.remote, self.replicated, self.leader_epoch = route, remote, replicated, leader_epoch

    async def send_many(self, marker: Marker) -> dict[tuple[str, int], int]:
        """Every partition of `marker` written by its leader: {(topic, partition): error code}."""
        if self.route is None:
            return {tp: self.write(tp[0], tp[1], marker.producer_id, marker.producer_epoch, marker.commit,
                                   marker.coordinator_epoch, marker.transaction_version)
                    for tp in marker.partitions}
        results: dict[tuple[str, int], int] = {}
        remote: dict[int, list[tuple[str, int]]] = {}
        local: list[tuple[str, int]] = []
        for tp in marker.partitions:
            leader = self.route(*tp)
            if leader is None:
                local.append(tp)
            elif leader < 0:
                results[tp] = NOT_LEADER
            else:
                remote.setdefault(leader, []).append(tp)
        jobs = [self._send_remote(node, marker._replace(partitions=tuple(tps))) for node, tps in remote.items()]
        jobs += [self.write_replicated(tp, marker) for tp in local]
        for part in await asyncio.gather(*jobs):
            results.update(part)
        return results

    async def _send_remote(self, node: int, marker: Marker) -> dict[tuple[str, int], int]:
        assert self.remote is not None
        try:
            answered = await self.remote(node, [marker])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("WriteTxnMarkers to node %d failed: %s", node, exc)
            answered = {}
        return {tp: answered.get(tp, NOT_LEADER) for tp in marker.partitions}

    async def write_replicated(self, tp: tuple[str, int], marker: Marker) -> dict[tuple[str, int], int]:
        """Cluster: append one marker as the partition's leader and wait until it is replicated."""
        code, end = self._append(tp[0], tp[1], marker.producer_id, marker.producer_epoch, marker.commit,
                                 marker.coordinator_epoch, marker.transaction_version)
        if not code and end >= 0 and self.replicated is not None:
            code = await self.replicated(tp[0], tp[1], end)
        return {tp: code}

    def add_listener(self, topic: str, listener: MarkerListener) -> None:
        """Be told about every marker written to `topic` (the group coordinator for __consumer_offsets)."""
        self.listeners[topic] = listener

    def write(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
              coordinator_epoch: int, transaction_version: int = 0) -> int:
        """Append one marker; returns a Kafka error code (0, UNKNOWN_TOPIC_OR_PARTITION,
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR, ...).
        `transaction_version` is that of the transaction (WriteTxnMarkers v2): a TV2 marker must carry
        an epoch newer than the producer's data in the partition."""
        return self._append(topic, partition, producer_id, producer_epoch, commit, coordinator_epoch,
                            transaction_version)[0]

    def _append(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                coordinator_epoch: int, transaction_version: int) -> tuple[int, int]:
        """(error code, end offset after the marker or -1)."""
        plog = self.catalog.partition_log(topic, partition)
        if plog is None:
            return ke.UnknownTopicOrPartitionError.errno, -1
        if self.route is not None and self.route(topic, partition) is not None:
            return NOT_LEADER, -1
        batch = build_marker_batch(producer_id, producer_epoch, coordinator_epoch, commit,
                                   int(self.clock() * 1000))
        leader_epoch = MARKER_LEADER_EPOCH if self.leader_epoch is None else self.leader_epoch(topic, partition)
        try:
            info = plog.append(batch, leader_epoch=leader_epoch, origin=AppendOrigin.COORDINATOR,
                               transaction_version=transaction_version)
        except Exception as exc:
            code = self.error_code(exc)
            log.info("%s marker for producer %d epoch %d to %s-%d failed: %s (%d)",
                     "COMMIT" if commit else "ABORT", producer_id, producer_epoch, topic, partition, exc, code)
            return code, -1
        listener = self.listeners.get(topic)
        if listener is not None:
            try:
                listener(partition, producer_id, commit)
            except Exception:
                log.exception("marker listener of %s failed for producer %d", topic, producer_id)
        return 0, info.last_offset + 1
