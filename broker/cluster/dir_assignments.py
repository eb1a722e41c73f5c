"""The broker's side of AssignReplicasToDirs (API 73, KIP-858; Kafka's AssignmentsManager): the active
controller learns in which log dir each of this broker's replicas lives.

A reconciliation loop (every RECONCILE_S) compares, for each partition of the metadata image that has a
replica on this broker and a log here, the dir the image names for this broker
(PartitionInfo.directory) with the dir the log is in (its log dir's directory.id, as registered). What
differs — a replica just created in a node with several log dirs (the controller recorded UNASSIGNED),
a replica moved by AlterReplicaLogDirs — is sent in one request per round, grouped by dir and topic (at
most MAX_PER_REQUEST partitions, Kafka's limit). An answer of NONE is remembered for ACK_GRACE_S (the
image catches up with the committed change meanwhile); a per-partition error (deleted, reassigned away)
drops it; a failure (no controller, STALE_BROKER_EPOCH while re-registering) retries the partition after
an exponential backoff bounded by MAX_BACKOFF_S.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minikafka.broker.cluster.runtime import ClusterRuntime

log = logging.getLogger(__name__)

VERSION = 0
RECONCILE_S = 0.5
ACK_GRACE_S = 5.0
FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 10.0
MAX_PER_REQUEST = 2250  # Kafka's AssignmentsManager.MAX_ASSIGNMENTS_PER_REQUEST

TP = tuple[str, int]


class DirAssigner:
    def __init__(self, cluster: "ClusterRuntime") -> None:
        self.cluster = cluster
        self._acked: dict[TP, tuple[str, float]] = {}  # partition -> (dir id, when the controller agreed)
        self._retry: dict[TP, tuple[str, int, float]] = {}  # partition -> (dir id, failures, not before)
        self.sent = 0  # requests sent (tests, logs)

    def _dir_ids(self) -> dict[Path, str]:
        """Log dir (as configured, and resolved) -> its id as the image keeps it (url-safe base64, as registered)."""
        import base64
        ids = getattr(self.cluster, "_log_dir_ids", None) or {}
        out = {}
        for d, i in ids.items():  # as configured and as resolved: a partition's parent is found without a syscall
            out[Path(d)] = out[Path(d).resolve()] = base64.urlsafe_b64encode(i.bytes).decode().rstrip("=")
        return out

    def pending(self, now: float) -> list[tuple[str, bytes, int]]:
        """(dir id, topic id, partition) the controller should learn of now."""
        cluster = self.cluster
        image, me, logs = cluster.image, cluster.node_id, cluster.state.logs
        ids = self._dir_ids()
        out = []
        for t in list(image.topics.values()):
            for p in list(t.partitions.values()):
                if me not in p.replicas:
                    continue
                directory = logs.directory(t.name, p.partition)
                if directory is None:
                    continue
                dir_id = ids.get(directory.parent)
                if dir_id is None:
                    dir_id = ids.get(directory.parent.resolve())
                if dir_id is None or p.directory(me) == dir_id:
                    continue
                tp = (t.name, p.partition)
                acked = self._acked.get(tp)
                if acked is not None and acked[0] == dir_id and now - acked[1] < ACK_GRACE_S:
                    continue
                retry = self._retry.get(tp)
                if retry is not None and retry[0] == dir_id and now < retry[2]:
                    continue
                out.append((dir_id, t.topic_id, p.partition))
        return out[:MAX_PER_REQUEST]

    async def run(self) -> None:
        while True:
            await asyncio.sleep(RECONCILE_S)
            if self.cluster.broker_epoch < 0:
                continue
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the loop die: the next round tries again
                log.exception("cluster: directory assignment round failed")

    async def reconcile(self) -> None:
        from minikafka.broker.cluster.runtime import ControllerUnavailableError
        from minikafka.protocol.messages import AssignReplicasToDirsRequest, AssignReplicasToDirsResponse
        now = time.monotonic()
        todo = self.pending(now)
        if not todo:
            return
        names = {t.topic_id: t.name for t in self.cluster.image.topics.values()}
        grouped: dict[str, dict[bytes, list[int]]] = {}
        for dir_id, tid, index in todo:
            grouped.setdefault(dir_id, {}).setdefault(tid, []).append(index)
        D = AssignReplicasToDirsRequest.DirectoryData
        T, P = D.TopicData, D.TopicData.PartitionData
        req = AssignReplicasToDirsRequest(broker_id=self.cluster.node_id, broker_epoch=self.cluster.broker_epoch,
                                          directories=[D(id=_wire(d), topics=[
                                              T(topic_id=uuid.UUID(bytes=tid), partitions=[
                                                  P(partition_index=i) for i in parts])
                                              for tid, parts in topics.items()]) for d, topics in grouped.items()])
        self.sent += 1
        try:
            resp = await self.cluster.controller_request(req, VERSION, AssignReplicasToDirsResponse,
                                                         timeout_s=self.cluster.request_timeout_s * 2)
            code = resp.error_code
        except ControllerUnavailableError:
            resp, code = None, -1
        if code:
            log.info("cluster: AssignReplicasToDirs of %d partitions failed (error %d); retrying later", len(todo),
                     code)
            for dir_id, tid, index in todo:
                self._failed((names.get(tid, ""), index), dir_id, now)
            return
        done = time.monotonic()
        for d in resp.directories:
            dir_id = _image_id(d.id)
            for t in d.topics:
                name = names.get(t.topic_id.bytes, "")
                for p in t.partitions:
                    tp = (name, p.partition_index)
                    self._retry.pop(tp, None)
                    if p.error_code == 0:
                        self._acked[tp] = (dir_id, done)
                        log.info("cluster: the controller records %s-%d in log dir %s", name, p.partition_index,
                                 dir_id)
                    else:  # deleted or reassigned away meanwhile: the image tells what to do next
                        log.info("cluster: AssignReplicasToDirs of %s-%d refused with error %d", name,
                                 p.partition_index, p.error_code)
                        self._acked[tp] = (dir_id, done)
        for tp in [tp for tp, (_d, at) in self._acked.items() if done - at >= ACK_GRACE_S]:
            del self._acked[tp]

    def _failed(self, tp: TP, dir_id: str, now: float) -> None:
        old = self._retry.get(tp)
        failures = old[1] + 1 if old is not None and old[0] == dir_id else 1
        backoff = min(FIRST_BACKOFF_S * (2 ** (failures - 1)), MAX_BACKOFF_S)
        self._retry[tp] = (dir_id, failures, now + backoff)


def _wire(dir_id: str) -> uuid.UUID:
    import base64
    return uuid.UUID(bytes=base64.urlsafe_b64decode(dir_id + "=" * (-len(dir_id) % 4)))


def _image_id(value: uuid.UUID) -> str:
    import base64
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
