"""Replica placement as Kafka's KRaft controller does it (StripedReplicaPlacer): rack-aware striping.

Every registered broker not in controlled shutdown and with a log dir that is not cordoned
(cordoned.log.dirs, KIP-1066) is usable; a fenced one may hold a follower replica
(it joins the ISR once back) but never the first replica, the leader. Brokers are grouped by rack
(no rack is a rack of its own); racks are visited round-robin from a random start that moves by one per
partition, and within a rack brokers are taken round-robin from a random offset, so leaders and
replicas spread over racks first and brokers second. After as many partitions as there are unfenced
brokers the racks and brokers are shuffled, to avoid repeating the same assignments.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field


class PlacementError(Exception):
    """The placement cannot be done (Kafka's InvalidReplicationFactorException)."""


@dataclass(frozen=True, slots=True)
class UsableBroker:
    id: int
    rack: str | None = None
    fenced: bool = False


@dataclass
class _Brokers:
    """Brokers of one kind in one rack; `next(epoch)` yields each once per iteration epoch, starting one
    further every epoch."""
    ids: list[int] = field(default_factory=list)
    index: int = 0
    offset: int = 0
    epoch: int = 0

    def initialize(self, rng: random.Random) -> None:
        if self.ids:
            self.ids.sort()
            self.offset = rng.randrange(len(self.ids))

    def next(self, epoch: int) -> int:
        if not self.ids:
            return -1
        if self.epoch != epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.ids)
        if self.index >= len(self.ids):
            return -1
        broker = self.ids[(self.index + self.offset) % len(self.ids)]
        self.index += 1
        return broker


@dataclass
class _Rack:
    unfenced: _Brokers = field(default_factory=_Brokers)
    fenced: _Brokers = field(default_factory=_Brokers)

    def next(self, epoch: int) -> int:
        broker = self.unfenced.next(epoch)
        return broker if broker >= 0 else self.fenced.next(epoch)


class _Racks:
    def __init__(self, brokers: list[UsableBroker], rng: random.Random) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        for b in brokers:
            rack = self.racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).ids.append(b.id)
        for rack in self.racks.values():
            rack.unfenced.initialize(rng)
            rack.fenced.initialize(rng)
        # no rack sorts first, as Kafka's comparator of Optional<String>
        self.names: list[str | None] = sorted(self.racks, key=lambda n: (n is not None, n or ""))
        self.total = len(brokers)
        self.unfenced = sum(not b.fenced for b in brokers)
        self.epoch = 0
        self.offset = rng.randrange(len(self.names)) if self.names else 0

    def place(self, replication_factor: int) -> list[int]:
        if self.epoch == self.unfenced and self.unfenced > 1:
            self.rng.shuffle(self.names)
            for rack in self.racks.values():
                self.rng.shuffle(rack.unfenced.ids)
                self.rng.shuffle(rack.fenced.ids)
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        first_rack = self.offset
        while True:  # the leader: the next unfenced broker, from the first rack that has one left
            leader = self.racks[self.names[first_rack]].unfenced.next(self.epoch)
            if leader >= 0:
                break
            first_rack = (first_rack + 1) % len(self.names)
        replicas = [leader]
        rack_index = self.offset
        for _ in range(1, replication_factor):
            broker = -1
            while broker < 0:
                if rack_index == first_rack:
                    first_rack = -1  # the leader's rack gave its broker for this round already
                else:
                    broker = self.racks[self.names[rack_index]].next(self.epoch)
                rack_index = (rack_index + 1) % len(self.names)
            replicas.append(broker)
        self.epoch += 1
        self.offset += 1
        return replicas


def place(brokers: list[UsableBroker], partitions: int, replication_factor: int, *, start_partition: int = 0,
          rng: random.Random | None = None) -> dict[int, list[int]]:
    """Replicas per partition index in [start_partition, start_partition + partitions)."""
    if replication_factor <= 0:
        raise PlacementError(f"Invalid replication factor {replication_factor}: the replication factor must "
                             f"be positive.")
    if not any(not b.fenced for b in brokers):
        raise PlacementError("All brokers are currently fenced, or have all their log directories cordoned.")
    if replication_factor > len(brokers):
        raise PlacementError(f"The target replication factor of {replication_factor} cannot be reached because "
                             f"only {len(brokers)} broker(s) are registered or some brokers have all their log "
                             f"directories cordoned.")
    racks = _Racks(brokers, rng or random.Random())
    return {start_partition + i: racks.place(replication_factor) for i in range(partitions)}
