"""Replica placement: Kafka's rack-unaware assignment (AdminUtils.assignReplicasToBrokersRackUnaware).

Over the given brokers (sorted): partition p's first replica is brokers[(p + start) % n], so leaders
go round-robin from a random start; the followers follow at a shift that grows by one every n
partitions, so replicas of consecutive partitions spread too. RF > brokers is refused with Kafka's
message (INVALID_REPLICATION_FACTOR).
"""
from __future__ import annotations

import random


class PlacementError(Exception):
    """The placement cannot be done (Kafka's InvalidReplicationFactorException)."""


def place(brokers: list[int], partitions: int, replication_factor: int, *, start_partition: int = 0,
          rng: random.Random | None = None, fixed_start: int = -1) -> dict[int, list[int]]:
    """Replicas per partition index in [start_partition, start_partition + partitions)."""
    if replication_factor <= 0:
        raise PlacementError("Replication factor must be larger than 0.")
    ids = sorted(brokers)
    n = len(ids)
    if replication_factor > n:
        raise PlacementError(f"Unable to replicate the partition {replication_factor} time(s): The target "
                             f"replication factor of {replication_factor} cannot be reached because only {n} "
                             f"broker(s) are registered.")
    rng = rng or random.Random()
    start = fixed_start if fixed_start >= 0 else rng.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    out: dict[int, list[int]] = {}
    current = max(0, start_partition)
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, shift, j, n)])
        out[current] = replicas
        current += 1
    return out


def _replica_index(first: int, second_shift: int, index: int, n: int) -> int:
    shift = 1 + (second_shift + index) % (n - 1)
    return (first + shift) % n
