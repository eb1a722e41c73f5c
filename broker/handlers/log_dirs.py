"""DescribeLogDirs (API 35, `kafka-log-dirs`, and what `kafka-reassign-partitions` asks first): the
partitions this node holds a replica of, per log dir, with their size on disk.

DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED at the top, v3+, with no results, as
Kafka). A request naming topics (null = all) lists only the named partitions held here. Sizes are the
segment (.log) files' bytes, read in a worker thread (a request's cost grows with the partitions it
names); OffsetLag is 0 (no future replicas: a partition never moves between this node's dirs); v4
adds the dir's total and usable bytes, v5 IsCordoned (KIP-1066: the dir is in `cordoned.log.dirs`).
"""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.protocol.errors import CLUSTER_AUTHORIZATION_FAILED, KAFKA_STORAGE_ERROR


Held = list[tuple[str, int, Path]]  # (topic, partition, directory)


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
        for topic, p, directory in held:
            if directory.parent.resolve() == root:
                by_topic.setdefault(topic, []).append(P(partition_index=p, partition_size=_partition_size(directory),
                                                        offset_lag=0, is_future_key=False))
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
    held = [(topic, p, directory) for topic, p in wanted if (directory := logs.directory(topic, p)) is not None]
    config = ctx.broker.config
    results = await asyncio.to_thread(_describe, list(config.log_dirs), held, config.cordoned_log_dirs)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
