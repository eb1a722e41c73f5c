"""`minikafka storage format --standalone | --initial-controllers ... | --no-initial-controllers` (KIP-853),
as Kafka's `kafka-storage format`: meta.properties (cluster id, node id, directory id) in every log dir and,
for a controller that bootstraps the quorum, the bootstrap checkpoint of the metadata log —
`__cluster_metadata-0/00000000000000000000-0000000000.checkpoint` holding the voter set (Kafka's
VotersRecord) at kraft.version 1 (raft/store.py's snapshot format). The quorum's first leader writes
that voter set into the log (raft/core.py); from then on the voters are changed by AddRaftVoter /
RemoveRaftVoter (`kafka-metadata-quorum add-controller / remove-controller`)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.raft.config import new_cluster_id
from minikafka.raft.store import read_snapshots, write_snapshot

if TYPE_CHECKING:
    from minikafka.broker.config.core import BrokerConfig

METADATA_DIR = "__cluster_metadata-0"


class FormatError(ValueError):
    """The format cannot be done (Kafka's kafka-storage refusals)."""


def _controller_endpoints(config: "BrokerConfig") -> list[dict]:
    names = [n.strip().upper() for n in config.get("controller.listener.names").split(",") if n.strip()]
    advertised = {l.name: l for l in config.advertised_listeners}
    out = []
    for listener in config.listeners:
        if listener.name in names:
            shown = advertised.get(listener.name, listener)
            out.append({"name": listener.name, "host": shown.host, "port": shown.port})
    return out


def parse_initial_controllers(spec: str) -> list[dict]:
    """Kafka's --initial-controllers: `id@host:port:directoryId,...`."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        m = re.match(r"^(\d+)@(\[[^\]]*\]|[^:@\[\]]+):(\d+):([A-Za-z0-9_-]{22})$", item)
        if m is None:
            raise FormatError(f"Failed to parse --initial-controllers entry {item!r}: expected id@host:port:directoryId")
        out.append({"voterId": int(m.group(1)), "voterDirectoryId": m.group(4),
                    "host": m.group(2).strip("[]"), "port": int(m.group(3))})
    if len({c["voterId"] for c in out}) != len(out):
        raise FormatError("--initial-controllers names a node id twice")
    return out


def format_storage(config: "BrokerConfig", cluster_id: str | None, *, standalone: bool = False,
                   initial_controllers: str | None = None, no_initial_controllers: bool = False,
                   ignore_formatted: bool = False) -> list[str]:
    """Format the log dirs; the lines to print. FormatError as Kafka's tool refuses."""
    roles = {r.strip() for r in config.get("process.roles").split(",") if r.strip()}
    chosen = sum(map(bool, (standalone, initial_controllers, no_initial_controllers)))
    static_voters = config.get("controller.quorum.voters").strip()
    if chosen > 1:
        raise FormatError("Only one of --standalone, --initial-controllers and --no-initial-controllers may be given")
    if chosen and static_voters:
        raise FormatError("You cannot specify --standalone, --initial-controllers or --no-initial-controllers when "
                          "controller.quorum.voters is set (a static quorum)")
    if "controller" in roles and not static_voters and not chosen:
        raise FormatError("Because controller.quorum.voters is not set on this controller, you must specify one of "
                          "the following: --standalone, --initial-controllers, or --no-initial-controllers.")
    if chosen and "controller" not in roles:
        raise FormatError("--standalone, --initial-controllers and --no-initial-controllers are for controllers "
                          "(process.roles has no controller)")
    cluster_id = cluster_id or config.get("cluster.id") or None
    if not cluster_id:
        raise FormatError("--cluster-id is required (kafka-storage random-uuid makes one; so does "
                          "`minikafka storage random-uuid`)")
    node_id = config.node_id
    directory_id = new_cluster_id()
    voters: list[dict] | None = None
    if standalone:
        endpoints = _controller_endpoints(config)
        if not endpoints:
            raise FormatError("--standalone: no controller listener (controller.listener.names) in listeners")
        voters = [{"voterId": node_id, "voterDirectoryId": directory_id, "endpoints": endpoints}]
    elif initial_controllers:
        parsed = parse_initial_controllers(initial_controllers)
        mine = [c for c in parsed if c["voterId"] == node_id]
        if mine:
            directory_id = mine[0]["voterDirectoryId"]
        listener = _controller_endpoints(config)[0]["name"] if _controller_endpoints(config) else "CONTROLLER"
        voters = [{"voterId": c["voterId"], "voterDirectoryId": c["voterDirectoryId"],
                   "endpoints": [{"name": listener, "host": c["host"], "port": c["port"]}]} for c in parsed]
    lines = []
    for d in config.log_dirs:
        meta = d / "meta.properties"
        if meta.exists():
            if ignore_formatted:
                lines.append(f"All of the log directories are already formatted.")
                continue
            raise FormatError(f"Log directory {d} is already formatted. Use --ignore-formatted to ignore this "
                              "directory and format the others.")
        d.mkdir(parents=True, exist_ok=True)
        from minikafka.storage.partition_metadata import atomic_write
        dir_id = directory_id if d == config.log_dirs[0] else new_cluster_id()
        atomic_write(meta, ("#\n#minikafka storage format\nversion=1\n"
                            f"cluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={dir_id}\n").encode())
        lines.append(f"Formatting metadata directory {d} with metadata.version 4.3-IV0.")
    if voters is not None and lines and lines[0].startswith("Formatting"):
        metadata = config.log_dirs[0] / METADATA_DIR
        metadata.mkdir(parents=True, exist_ok=True)
        if read_snapshots(metadata):
            raise FormatError(f"{metadata} already holds a checkpoint")
        for v in voters:
            v["kRaftVersionFeature"] = {"minSupportedVersion": 0, "maxSupportedVersion": 1}
        write_snapshot(metadata, 0, 0, {"clusterId": None, "image": None, "kraftVersion": 1,
                                        "voters": sorted(voters, key=lambda v: v["voterId"])})
        (metadata / "quorum.log").touch()  # (the log manager keeps a metadata dir that has its log)
    return lines


def directory_id_of(log_dir: Path) -> str | None:
    from minikafka.broker.config.core import parse_properties
    try:
        return parse_properties((log_dir / "meta.properties").read_text()).get("directory.id")
    except FileNotFoundError:
        return None
