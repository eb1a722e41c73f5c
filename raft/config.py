"""The metadata quorum's own configuration: the voters and timeouts a node runs Raft with (Kafka's
controller.quorum.* keys, parsed by the broker's config, broker/config/core.py), and Kafka's cluster id format."""
from __future__ import annotations

import re
from dataclasses import dataclass

from minikafka.protocol.uuids import random_uuid, uuid_text


class QuorumConfigError(ValueError):
    """A controller.quorum.* value that cannot be used."""


def new_cluster_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): url-safe base64 without padding (22 chars), never starting
    with "-" (Kafka draws again so the id cannot be taken for a command-line option)."""
    return uuid_text(random_uuid())


@dataclass(frozen=True)
class QuorumConfig:
    """The metadata quorum of a node in KRaft combined mode: the voters' controller endpoints (by node
    id, this node's included), the listener name(s) the quorum's RPCs are served on, Kafka's timeouts."""
    voters: dict[int, tuple[str, int]]
    controller_listener_names: tuple[str, ...]
    fetch_timeout_ms: int
    election_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    # KIP-630 snapshots: Kafka's metadata.log.max.record.bytes.between.snapshots / .max.snapshot.interval.ms
    snapshot_max_bytes: int = 20 * 1024 * 1024
    snapshot_interval_ms: int = 3_600_000
    roles: frozenset[str] = frozenset({"broker", "controller"})  # process.roles
    # KIP-853: controller.quorum.bootstrap.servers without voters — the voter set comes from the log
    bootstrap_servers: tuple[tuple[str, int], ...] = ()

    @property
    def dynamic(self) -> bool:
        """A dynamic quorum (kraft.version 1): no static voters, found through the bootstrap servers."""
        return not self.voters and bool(self.bootstrap_servers)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        """A voter of the quorum (process.roles has controller); a broker-only node is an observer."""
        return "controller" in self.roles


def parse_voters(spec: str) -> dict[int, tuple[str, int]]:
    """Kafka's controller.quorum.voters: `id@host:port,...` (host may be [v6])."""
    out: dict[int, tuple[str, int]] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        m = re.match(r"^(-?\d+)@(\[[^\]]*\]|[^:@\[\]]+):(\d+)$", item)
        if m is None or int(m.group(3)) > 65535 or int(m.group(1)) < 0:
            raise QuorumConfigError(f"controller.quorum.voters entry {item!r} is not id@host:port")
        voter = int(m.group(1))
        if voter in out:
            raise QuorumConfigError(f"controller.quorum.voters names node {voter} twice")
        out[voter] = (m.group(2).strip("[]"), int(m.group(3)))
    return out


def parse_bootstrap_servers(spec: str) -> tuple[tuple[str, int], ...]:
    """Kafka's controller.quorum.bootstrap.servers: `host:port,...` (host may be [v6])."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        m = re.match(r"^(\[[^\]]*\]|[^:@\[\]]+):(\d+)$", item)
        if m is None or int(m.group(2)) > 65535:
            raise QuorumConfigError(f"controller.quorum.bootstrap.servers entry {item!r} is not host:port")
        out.append((m.group(1).strip("[]"), int(m.group(2))))
    return tuple(out)
