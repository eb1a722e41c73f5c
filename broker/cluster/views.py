"""What handlers answer about brokers and partitions on a cluster, from the metadata image (Kafka's
KRaftMetadataCache): alive brokers are the registered, unfenced ones; a partition's offline replicas
are those on brokers that are not alive; a leader without an endpoint on the client's listener is
answered as LEADER_NOT_AVAILABLE with leader -1."""
from __future__ import annotations

import random
from typing import NamedTuple

from minikafka.metadata.image import MetadataImage
from minikafka.protocol.errors import LEADER_NOT_AVAILABLE



class PartitionView(NamedTuple):
    error: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    elr: list[int] = []  # eligible leader replicas (KIP-966)
    last_known_elr: list[int] = []


def alive_brokers(image: MetadataImage, listener: str) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of the unfenced brokers with an endpoint on `listener`, by id."""
    out = []
    for b in sorted(image.brokers.values(), key=lambda b: b.id):
        ep = b.endpoints.get(listener)
        if ep is not None and not b.fenced:
            out.append((b.id, ep[0], ep[1], b.rack))
    return out


def brokers_for_clients(image: MetadataImage, listener: str, self_id: int,
                        self_endpoint: tuple[str, int]) -> list[tuple[int, str, int, str | None]]:
    """`alive_brokers`, plus this node itself while the image has no registration of it yet (start-up,
    before its BrokerRegistration is committed): a client bootstrapping here always finds a broker."""
    out = alive_brokers(image, listener)
    if self_id not in image.brokers:
        out = sorted([*out, (self_id, self_endpoint[0], self_endpoint[1], None)])
    return out


def endpoint(image: MetadataImage, broker_id: int, listener: str) -> tuple[str, int] | None:
    """The alive broker's (host, port) on `listener`, else None."""
    b = image.brokers.get(broker_id)
    if b is None or b.fenced:
        return None
    ep = b.endpoints.get(listener)
    return None if ep is None else (ep[0], ep[1])


def partition_view(image: MetadataImage, topic: str, partition: int, listener: str) -> PartitionView | None:
    p = image.partition(topic, partition)
    if p is None:
        return None
    alive = {b.id for b in image.brokers.values() if not b.fenced}
    offline = [r for r in p.replicas if r not in alive]
    leader, error = p.leader, 0
    if endpoint(image, leader, listener) is None:
        leader, error = -1, LEADER_NOT_AVAILABLE
    return PartitionView(error, leader, p.leader_epoch, list(p.replicas), list(p.isr), offline, list(p.elr),
                         list(p.last_known_elr))


def leader_endpoint(image: MetadataImage, topic: str, partition: int, listener: str) -> tuple[int, str, int] | None:
    """(leader id, host, port) of the partition's leader on `listener` (FindCoordinator), else None."""
    p = image.partition(topic, partition)
    if p is None or p.leader < 0:
        return None
    ep = endpoint(image, p.leader, listener)
    return None if ep is None else (p.leader, ep[0], ep[1])


def controller_id(image: MetadataImage, listener: str) -> int:
    """What Metadata/DescribeCluster on a broker listener name as controller: as Kafka's KRaft brokers
    (getRandomAliveBrokerId), a random alive broker per answer, else -1. Clients send their admin requests
    there and any broker forwards them to the active controller; naming the active controller itself would
    leave a client that cached it waiting on a dead node after a controller failover."""
    alive = [b[0] for b in alive_brokers(image, listener)]
    return random.choice(alive) if alive else -1
