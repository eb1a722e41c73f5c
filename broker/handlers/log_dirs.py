"""DescribeLogDirs (API 35) and AlterReplicaLogDirs (API 34): the log dirs of this node (JBOD, several
`log.dirs`) and moving a replica between them (`kafka-reassign-partitions` with "log_dirs",
`kafka-log-dirs --describe`, the Admin client's describeLogDirs / alterReplicaLogDirs).

DescribeLogDirs (API 35, `kafka-log-dirs`, and what `kafka-reassign-partitions` asks first): the
partitions this node holds a replica of, per log dir, with their size on disk.

DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED at the top, v3+, with no results, as
Kafka). A request naming topics (null = all) lists only the named partitions held here. Sizes are the
segment (.log) files' bytes, read in a worker thread (a request's cost grows with the partitions it
names); a replica being moved to another dir is listed there too, with IsFutureKey and its OffsetLag
(the log end offset minus what the copy holds); v4 adds the dir's total and usable bytes, v5
IsCordoned (KIP-1066: the dir is in `cordoned.log.dirs`).

AlterReplicaLogDirs as Kafka's ReplicaManager.alterReplicaLogDirs, per partition: ALTER on the cluster
(else CLUSTER_AUTHORIZATION_FAILED for every partition); a topic name too long for the future
directory's name -> INVALID_TOPIC_EXCEPTION; a dir that is not one of `log.dirs` by its absolute path
(a relative path included) -> LOG_DIR_NOT_FOUND; an unusable dir -> KAFKA_STORAGE_ERROR; a cordoned dir
-> INVALID_REPLICA_ASSIGNMENT; then the dir is remembered as where the partition goes if it is created
here later; a partition that does not exist -> UNKNOWN_TOPIC_OR_PARTITION, one with no replica here (a
cluster) -> REPLICA_NOT_AVAILABLE; else NONE and the move runs in the background
(storage/replica_move.py; NONE too if the replica is already in that dir).
"""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from kafka.protocol.admin import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.protocol.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_TOPIC_EXCEPTION,
    KAFKA_STORAGE_ERROR,
    LOG_DIR_NOT_FOUND,
    REPLICA_NOT_AVAILABLE,
    UNKNOWN_TOPIC_OR_PARTITION,
)


Held = list[tuple[str, int, Path, int | None]]  # (topic, partition, directory, offset lag of a future replica)


def _partition_size(directory: Path) -> int:
    try:
        with os.scandir(directory) as entries:
            return sum(e.stat().st_size for e in entries if e.name.endswith(".log") and e.is_file())
    except OSError:
        return 0  # removed meanwhile (deleted or moved away): nothing left of it here


def _describe(log_dirs: list[Path], held: Held, cordoned: frozenset[Path] = frozenset()) -> list:
    R = DescribeLogDirsResponse.DescribeLogDirsResult
    T = R.DescribeLogDirsTopic
    P = T.DescribeLogDirsPartition
    results = []
    for d in log_dirs:
        root = d.resolve()
        by_topic: dict[str, list] = {}
        for topic, p, directory, lag in held:
            if directory.parent.resolve() == root:
                by_topic.setdefault(topic, []).append(P(partition_index=p, partition_size=_partition_size(directory),
                                                        offset_lag=lag or 0, is_future_key=lag is not None))
        total = usable = -1
        error = 0
        try:
            usage = shutil.disk_usage(root)
            total, usable = usage.total, usage.free
        except OSError:
            error = KAFKA_STORAGE_ERROR
        results.append(R(error_code=error, log_dir=str(root), total_bytes=total, usable_bytes=usable,
                         is_cordoned=d in cordoned,
                         topics=[T(name=name, partitions=parts) for name, parts in sorted(by_topic.items())]))
    return results


@handles(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 5)
async def handle_describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not authorize_cluster(ctx, acl.DESCRIBE):
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED, results=[])
    logs = ctx.broker.logs
    if req.topics is None:
        wanted = logs.partitions()
    else:
        wanted = [(t.topic, p) for t in req.topics for p in dict.fromkeys(t.partitions)]
    held: Held = []
    for topic, p in wanted:
        directory = logs.directory(topic, p)
        if directory is None:
            continue
        held.append((topic, p, directory, None))
        move = logs.moving(topic, p)
        if move is not None and move.future_dir is not None:
            held.append((topic, p, move.future_dir, move.offset_lag))
    config = ctx.broker.config
    results = await asyncio.to_thread(_describe, list(config.log_dirs), held, config.cordoned_log_dirs)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)


# Kafka refuses a topic whose future directory name (`<topic>-<partition>.<32 hex>-future`) is longer
# than a file name may be (KAFKA-4893)
_FUTURE_NAME_EXTRA = 1 + 32 + len("-future")


def _dir_error(broker, path: str) -> tuple[Path | None, int]:
    logs = broker.logs
    log_dir = logs.log_dir_of(path)
    if log_dir is None:
        return None, LOG_DIR_NOT_FOUND
    if not os.path.isdir(log_dir):
        return None, KAFKA_STORAGE_ERROR
    if log_dir in broker.config.cordoned_log_dirs:
        return None, INVALID_REPLICA_ASSIGNMENT
    return log_dir, 0


def _alter(ctx: RequestContext, topic: str, partition: int, path: str) -> int:
    broker = ctx.broker
    if len(f"{topic}-{partition}") + _FUTURE_NAME_EXTRA > 255:
        return INVALID_TOPIC_EXCEPTION
    log_dir, code = _dir_error(broker, path)
    if code:
        return code
    logs = broker.logs
    logs.prefer_dir(topic, partition, log_dir)
    if not broker.catalog.has_partition(topic, partition):
        cluster = broker.cluster
        if cluster is not None and cluster.image.partition(topic, partition):
            return REPLICA_NOT_AVAILABLE  # Kafka: NOT_LEADER_OR_FOLLOWER kept as REPLICA_NOT_AVAILABLE here
        return UNKNOWN_TOPIC_OR_PARTITION
    try:
        logs.move_replica(topic, partition, log_dir)
    except OSError:
        return KAFKA_STORAGE_ERROR
    return 0


@handles(AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, 1, 2)
async def handle_alter_replica_log_dirs(ctx: RequestContext,
                                        req: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
    PartitionResult = TopicResult.AlterReplicaLogDirPartitionResult
    wanted: dict[tuple[str, int], str] = {}  # Kafka's partitionDirs map: the last dir named wins
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[(t.name, p)] = d.path
    allowed = authorize_cluster(ctx, acl.ALTER)
    by_topic: dict[str, list] = {}
    for (topic, p), path in wanted.items():
        code = _alter(ctx, topic, p, path) if allowed else CLUSTER_AUTHORIZATION_FAILED
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=p, error_code=code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        TopicResult(topic_name=topic, partitions=parts) for topic, parts in by_topic.items()])
