"""`meta.properties` in each log dir (Kafka's format): cluster id and node id, fixed at first start."""
from __future__ import annotations

import logging
from pathlib import Path

from minikafka.broker.config.core import ConfigError, parse_properties
from minikafka.raft.config import new_cluster_id

log = logging.getLogger(__name__)


def ensure_meta(log_dirs: list[Path], node_id: int, configured_cluster_id: str, *,
                agreed: bool = False) -> str | None:
    """Read or write meta.properties in every dir; all dirs must agree. Returns the cluster id.
    agreed=True (a metadata quorum): with no id configured or stored, write nothing and return None;
    the quorum agrees on the id and `write_meta` records it later."""
    found: dict[Path, dict[str, str]] = {}
    for d in log_dirs:
        d.mkdir(parents=True, exist_ok=True)
        path = d / "meta.properties"
        if path.exists():
            found[d] = parse_properties(path.read_text())
    ids = {p.get("cluster.id") for p in found.values()}
    if len(ids) > 1:
        raise ConfigError(f"log dirs belong to different clusters: {sorted(filter(None, ids))}")
    if agreed and not ids and not configured_cluster_id:
        return None
    cluster_id = next(iter(ids)) if ids else (configured_cluster_id or new_cluster_id())
    if configured_cluster_id and cluster_id != configured_cluster_id:
        raise ConfigError(f"cluster.id {configured_cluster_id} does not match stored {cluster_id}")
    for d, props in found.items():
        if props.get("node.id") not in (None, str(node_id)):
            raise ConfigError(f"{d} belongs to node {props.get('node.id')}, this is node {node_id}")
    for d in log_dirs:
        if d not in found:
            _write(d, node_id, cluster_id)
    return cluster_id


def write_meta(log_dirs: list[Path], node_id: int, cluster_id: str) -> None:
    """Record the cluster id the quorum agreed on in every log dir that has no meta.properties yet."""
    for d in log_dirs:
        if not (d / "meta.properties").exists():
            _write(d, node_id, cluster_id)


def _write(d: Path, node_id: int, cluster_id: str) -> None:
    from minikafka.storage.partition_metadata import atomic_write
    d.mkdir(parents=True, exist_ok=True)
    atomic_write(d / "meta.properties", ("#\n#minikafka\nversion=1\n"
                                         f"cluster.id={cluster_id}\nnode.id={node_id}\n"
                                         f"directory.id={new_cluster_id()}\n").encode())
